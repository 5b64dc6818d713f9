export { DeliveryLog } from "./delivery-log.js";
export { sendThroughChannel } from "./channel-adapters.js";
