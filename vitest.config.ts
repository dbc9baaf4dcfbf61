import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Each test file gets its own database, so files can run side by side.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
