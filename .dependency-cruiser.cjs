/**
 * Import rules that CI keeps (`npm run check`). The layers, bottom to top, are described in
 * docs/design/layers.md; each rule below names the arrow it forbids.
 */
const pure = "^src/(session|text|history|errors|config)/";
const storage = "^src/(storage|transcript)/";
const above = "^src/(gateway|rpc|mcp|workers|tools|app|cli|inbound|runs|rotation|subagents|delivery|doctor|import)/";
// Process entry points: the only importers of the composition root (src/app).
const entryPoints = "^(src/app|src/cli|bin|bench)/|^src/index\\.ts$";

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
        path:
          "^src/(storage|transcript|queues|runs|rotation|runtimes|tools|gateway|rpc|mcp|workers|app|cli|inbound|" +
          "subagents|delivery|metrics|deployment|doctor|import|auth)/",
      },
    },
    {
      name: "storage-below-runs",
      comment: "Storage serves the layers above it and never reaches up.",
      severity: "error",
      from: { path: storage },
      // run-status.ts is a constant table with no imports of its own; the Lua loader generates
      // the scripts' `is_terminal` from it so Lua and TypeScript cannot disagree.
      to: { path: above, pathNot: "^src/runs/run-status\\.ts$" },
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
      from: { pathNot: `${entryPoints}|^src/gateway/` },
      to: { path: "^src/gateway/" },
    },
    {
      name: "app-is-the-root",
      comment: "src/app wires everything; only process entry points import it.",
      severity: "error",
      from: { pathNot: entryPoints },
      to: { path: "^src/app/" },
    },
    {
      name: "src-never-imports-tests",
      comment: "The shipped code stands without the tests and benchmarks.",
      severity: "error",
      from: { path: "^(src|bin)/" },
      to: { path: "^(test|bench)/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"] },
  },
};
