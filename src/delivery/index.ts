export { DeliveryLog, type DeliveryRecord, type DeliveryRoute, type DeliveryStatus } from "./delivery-log.js";
export { sendThroughChannel, DeliveryHttpError, type OutboundMessage } from "./channel-adapters.js";
