/** The figures, in report order. */
import type { Figure } from "../harness/context.js";
import { acceptRate } from "./accept-rate.js";
import { inboundTurns } from "./inbound-turns.js";
import { roundTripsFigure } from "./round-trips.js";
import { sendAndWait } from "./send-and-wait.js";
import { turnsHttp } from "./turns-http.js";
import { turnsInProcess } from "./turns-in-process.js";
import { workerRss } from "./worker-rss.js";
import { workerScaling } from "./worker-scaling.js";

export const FIGURES: Figure[] = [
  turnsInProcess,
  turnsHttp,
  sendAndWait,
  acceptRate,
  roundTripsFigure,
  workerScaling,
  workerRss,
  inboundTurns,
];
