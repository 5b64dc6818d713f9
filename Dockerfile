# syntax=docker/dockerfile:1
# Switchboard image: one image for every role (`switchboard start | gateway | worker | doctor …`).
#   docker build -t switchboard .
#   docker run --rm switchboard --help
# Stages: `build` compiles TypeScript with the dev dependencies; `prod-deps` installs only what
# runs; `runtime` gets the compiled code and those, and runs as the unprivileged `node` user.
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY bin ./bin
COPY bench ./bench
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    SWITCHBOARD_STATE_DIR=/var/lib/switchboard
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY examples ./examples
# `switchboard` on the PATH (the compiled CLI starts with `#!/usr/bin/env node`); the state dir
# (transcripts, runtime file) owned by the user the processes run as.
RUN chmod +x dist/src/cli/main.js \
 && ln -s /app/dist/src/cli/main.js /usr/local/bin/switchboard \
 && mkdir -p /var/lib/switchboard \
 && chown node:node /var/lib/switchboard
USER node
VOLUME ["/var/lib/switchboard"]
EXPOSE 7420
ENTRYPOINT ["switchboard"]
CMD ["--help"]
