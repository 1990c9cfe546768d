package producer

// HeaderCommand is the record header naming the command's kind ("upsert",
// "cancel", ...; [command.Kind]), so tools can filter the topic without
// decoding values.
const HeaderCommand = "chime-command"
