/** Methods that never write: they read from the read pool and spend no write budget. */
export const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
