/** chime's topic names (Go: schema.Topics). */

/** Put in front of every topic name; several installations can share a cluster. */
export const DEFAULT_PREFIX = "chime.";

/** The header naming a command's kind ("upsert", "cancel", ...) on job-commands. */
export const HEADER_COMMAND = "chime-command";

/** The topic the scheduler reads job commands from. */
export function jobCommandsTopic(prefix = ""): string {
  return (prefix || DEFAULT_PREFIX) + "job-commands";
}
