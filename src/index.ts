// Library entry point (CONTRACT.md §8): filled in as the pure modules land.
export { parseConfig } from "./config/index.js";
