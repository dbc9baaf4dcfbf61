/** A route's hooks of one kind (absent, one, or a list) with `hook` run after them. */
export function withHookAfter<Hook>(hooks: Hook | Hook[] | undefined, hook: Hook): Hook[] {
  if (hooks === undefined) return [hook];
  return Array.isArray(hooks) ? [...hooks, hook] : [hooks, hook];
}

/** A route's hooks of one kind with `hook` run before them. */
export function withHookFirst<Hook>(hooks: Hook | Hook[] | undefined, hook: Hook): Hook[] {
  if (hooks === undefined) return [hook];
  return Array.isArray(hooks) ? [hook, ...hooks] : [hook, hooks];
}
