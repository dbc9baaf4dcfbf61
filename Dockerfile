# Debian rather than Alpine: better-sqlite3 and @node-rs/argon2 ship musl builds too, but glibc is what the tests,
# CI and the benchmark run on, and musl's allocator is slower under argon2's hashing threads.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE}
ENV NODE_ENV=production HOST=0.0.0.0 DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev && npm cache clean --force
COPY bin ./bin
COPY --from=build /app/dist ./dist
# Created before VOLUME so that a new volume starts out owned by the user the server runs as.
RUN mkdir /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 3000
# Readiness, not liveness: "healthy" then means the database answers, which is what depends_on and operators want.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 3000}/health/ready`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1, so SIGTERM reaches the server, which stops accepting connections, finishes the requests in
# flight (10 s at most), closes the database and exits 0. The flag is the one `npm start` passes (docs/DEPLOY.md).
CMD ["node", "--max-semi-space-size=4", "dist/server.js"]
