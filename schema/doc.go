// Package schema owns chime's event contracts: the protobuf messages (in
// chimev1, generated from proto/), the goka codecs that carry them, the topic
// names, and the validation every producer of commands runs before publishing.
package schema
