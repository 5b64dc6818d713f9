/**
 * Import rules that CI keeps (`npm run check`). The layers, bottom to top, are described in
 * docs/design/layers.md; each rule below names the arrow it forbids.
 */
const pure = "^src/(session|text|history|errors)/";
const storage = "^src/(storage|transcript)/";
const above = "^src/(gateway|rpc|mcp|workers|tools|app|cli|inbound|runs|subagents|lifecycle|delivery)/";

module.exports = {
  forbidden: [
    {
      name: "no-cycles",
      comment: "An import cycle hides which module is the lower one.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "pure-model-stays-pure",
      comment: "Session model, text and history logic are plain functions without I/O.",
      severity: "error",
      from: { path: pure },
      to: {
        path: "^src/(storage|transcript|queues|runs|runtimes|tools|gateway|rpc|mcp|workers|app|cli|inbound|subagents|lifecycle|delivery|metrics|deployment)/",
      },
    },
    {
      name: "storage-below-runs",
      comment: "Storage serves the layers above it and never reaches up.",
      severity: "error",
      from: { path: storage },
      to: { path: above },
    },
    {
      name: "runtimes-below-gateway",
      comment: "A runtime is called by workers; it knows nothing of HTTP.",
      severity: "error",
      from: { path: "^src/runtimes/" },
      to: { path: "^src/(gateway|rpc|mcp|app|cli|workers)/" },
    },
    {
      name: "gateway-on-top",
      comment: "Only the composition root and entry points start the gateway.",
      severity: "error",
      from: { pathNot: "^(src/app|src/cli|src/gateway|src/mcp|workers|bin|processes)/|^src/index\\.ts$" },
      to: { path: "^src/gateway/" },
    },
    {
      name: "app-is-the-root",
      comment: "src/app wires everything; only process entry points import it.",
      severity: "error",
      from: { pathNot: "^(src/app|src/cli|workers|bin|processes)/|^src/index\\.ts$" },
      to: { path: "^src/app/" },
    },
    { name: "src-never-imports-tests", severity: "error", from: { path: "^src/" }, to: { path: "^(test|bench)/" } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
