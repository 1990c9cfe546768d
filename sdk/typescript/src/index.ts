/**
 * chime's TypeScript SDK: the HTTP API (Client, ProblemError), a Kafka
 * publisher (Publisher), callback verification (verify), and the protobuf
 * messages (gen/chime/v1).
 */

export * as commands from "./commands.js";
export { httpJob } from "./commands.js";
export * from "./gen/chime/v1/job_pb.js";
export { Client, type ClientOptions, DEFAULT_BASE_URL, ProblemError, type Schemas } from "./http.js";
export { Publisher, type PublisherOptions, PublishError, type Receipt } from "./kafka.js";
export { fnv1a32, jobKey, partitionOf } from "./partition.js";
export { DEFAULT_PREFIX, HEADER_COMMAND, jobCommandsTopic } from "./topics.js";
export { LIMITS, ValidationError, validateBatch, validateCommand } from "./validate.js";
export { type Callback, verify, WebhookVerificationError } from "./verify.js";
