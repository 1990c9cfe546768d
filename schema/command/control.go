package command

import (
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/chime-sched/chime/schema/chimev1"
)

// PutNamespace replaces namespace ns's configuration with cfg (the
// namespace processor keeps its keys and version).
func PutNamespace(ns string, cfg *chimev1.NamespaceConfig) *chimev1.NamespaceCommand {
	return &chimev1.NamespaceCommand{Namespace: ns, Command: &chimev1.NamespaceCommand_Put{Put: cfg}}
}

// AddKey registers an API key of namespace ns by its SHA-256 hash.
func AddKey(ns string, keyHash []byte) *chimev1.NamespaceCommand {
	return &chimev1.NamespaceCommand{Namespace: ns, Command: &chimev1.NamespaceCommand_AddKey{AddKey: &chimev1.AddKey{KeyHash: keyHash}}}
}

// RevokeKey removes the API key of namespace ns whose hash is keyHash.
func RevokeKey(ns string, keyHash []byte) *chimev1.NamespaceCommand {
	return &chimev1.NamespaceCommand{Namespace: ns, Command: &chimev1.NamespaceCommand_RevokeKey{RevokeKey: &chimev1.RevokeKey{KeyHash: keyHash}}}
}

// RotateSigningSecret makes secret namespace ns's signing secret; the one
// it replaces keeps signing beside it for overlap.
func RotateSigningSecret(ns, secret string, overlap *durationpb.Duration) *chimev1.NamespaceCommand {
	return &chimev1.NamespaceCommand{Namespace: ns, Command: &chimev1.NamespaceCommand_RotateSigningSecret{
		RotateSigningSecret: &chimev1.RotateSigningSecret{Secret: secret, Overlap: overlap},
	}}
}

// ForceOpen holds namespace ns's breaker open: every callback is deferred.
// note is the operator's text for the transition's reason.
func ForceOpen(ns, note string) *chimev1.BreakerCommand {
	return &chimev1.BreakerCommand{Namespace: ns, Note: note, Command: &chimev1.BreakerCommand_ForceOpen{ForceOpen: &chimev1.BreakerForceOpen{}}}
}

// ForceClosed holds namespace ns's breaker closed: every callback goes out.
func ForceClosed(ns, note string) *chimev1.BreakerCommand {
	return &chimev1.BreakerCommand{Namespace: ns, Note: note, Command: &chimev1.BreakerCommand_ForceClosed{ForceClosed: &chimev1.BreakerForceClosed{}}}
}

// Auto leaves a forced state: the breaker computes its state again.
func Auto(ns, note string) *chimev1.BreakerCommand {
	return &chimev1.BreakerCommand{Namespace: ns, Note: note, Command: &chimev1.BreakerCommand_Auto{Auto: &chimev1.BreakerAuto{}}}
}

// ResetBreaker closes namespace ns's breaker from any state, clearing its
// trips and window.
func ResetBreaker(ns, note string) *chimev1.BreakerCommand {
	return &chimev1.BreakerCommand{Namespace: ns, Note: note, Command: &chimev1.BreakerCommand_ResetBreaker{ResetBreaker: &chimev1.BreakerReset{}}}
}
