const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

/**
 * Text made safe for HTML or XML, in element content and double-quoted attributes alike; `]]>` needs nothing more
 * where no CDATA is written.
 */
export const escapeMarkup = (text: string): string => text.replace(/[&<>"]/g, (character) => ESCAPES[character]!);
