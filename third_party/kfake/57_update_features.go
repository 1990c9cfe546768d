package kfake

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// UpdateFeatures: v0-2
//
// KIP-584: mutate finalized feature levels. The features and their supported
// ranges are the kversion table for the cluster's version; kfake stores the
// levels set per Cluster and ApiVersions reports them over the table's
// defaults. Changing a level does not alter request behavior beyond what
// ApiVersions advertises.
//
// Behavior:
// * Unknown features => FEATURE_UPDATE_FAILED (per feature)
// * MaxVersionLevel outside the supported range => FEATURE_UPDATE_FAILED
// * MaxVersionLevel < 1 deletes the feature (returns it to level 0)
// * Downgrades require AllowDowngrade (v0) or UpgradeType != Upgrade (v1+)
// * ValidateOnly (v1+) returns what would happen without mutating state
// * v2 drops the per-feature Results list (errors go to top-level)
//
// Version notes:
// * v1: UpgradeType replaces AllowDowngrade, ValidateOnly
// * v2: Results removed (errors reported at top-level only)

func init() { regKey(57, 0, 2) }

func (c *Cluster) handleUpdateFeatures(creq *clientReq) (kmsg.Response, error) {
	req := creq.kreq.(*kmsg.UpdateFeaturesRequest)
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)

	if err := c.checkReqVersion(req.Key(), req.Version); err != nil {
		return nil, err
	}

	if e := c.denyCluster(creq, kmsg.ACLOperationAlter); e != nil {
		resp.ErrorCode = e.Code
		if creq.skipsWork(e) { // a timed-out update still updates
			return resp, nil
		}
	}

	vs := c.featureVersions()
	supported := make(map[string][2]int16)
	vs.EachSupportedFeature(func(name string, min, max int16) { supported[name] = [2]int16{min, max} })
	finalized := make(map[string]int16)
	vs.EachFinalizedFeature(func(name string, level int16) { finalized[name] = level })

	// Build per-feature results, then collapse into the top-level error
	// for v2 (which no longer carries per-feature Results).
	results := make([]kmsg.UpdateFeaturesResponseResult, 0, len(req.FeatureUpdates))
	pending := make(map[string]int16, len(req.FeatureUpdates))
	seen := make(map[string]bool, len(req.FeatureUpdates))

	// A fault can answer a feature before the work runs. The work's own
	// answer for that feature must not add an entry or replace the code.
	answered := make(map[string]bool)
	fail := func(name string, err *kerr.Error, msg string) {
		if answered[name] {
			return
		}
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature = name
		r.ErrorCode = err.Code
		if msg != "" {
			r.ErrorMessage = kmsg.StringPtr(msg)
		}
		results = append(results, r)
	}
	ok := func(name string) {
		if answered[name] {
			return
		}
		r := kmsg.NewUpdateFeaturesResponseResult()
		r.Feature = name
		results = append(results, r)
	}

	for _, fu := range req.FeatureUpdates {
		if e := creq.faults.check(faultKey{resource: fu.Feature}); e != nil {
			fail(fu.Feature, e, "")
			answered[fu.Feature] = true
			if creq.skipsWork(e) { // a timed-out update still updates the feature
				seen[fu.Feature] = true
				continue
			}
		}
		if seen[fu.Feature] {
			fail(fu.Feature, kerr.InvalidRequest, "duplicate feature update")
			continue
		}
		seen[fu.Feature] = true

		r, known := supported[fu.Feature]
		if !known {
			fail(fu.Feature, kerr.FeatureUpdateFailed, "unknown feature")
			continue
		}

		newLevel := max(fu.MaxVersionLevel, 0) // below 1 deletes
		if newLevel > r[1] {
			fail(fu.Feature, kerr.FeatureUpdateFailed, "level above supported max")
			continue
		}
		if newLevel < r[0] {
			fail(fu.Feature, kerr.FeatureUpdateFailed, "level below supported min")
			continue
		}

		curLevel := finalized[fu.Feature]
		if set, ok := c.features[fu.Feature]; ok {
			curLevel = set
		}
		downgrade := newLevel < curLevel

		allowDowngrade := fu.AllowDowngrade
		if req.Version >= 1 {
			// UpgradeType: 1=upgrade only, 2=safe downgrade, 3=unsafe downgrade
			allowDowngrade = fu.UpgradeType >= 2
		}
		if downgrade && !allowDowngrade {
			fail(fu.Feature, kerr.InvalidUpdateVersion, "downgrade not allowed")
			continue
		}

		pending[fu.Feature] = newLevel
		ok(fu.Feature)
	}

	validateOnly := req.Version >= 1 && req.ValidateOnly
	if !validateOnly {
		for name, level := range pending {
			c.features[name] = level
		}
	}

	// v2 dropped the per-feature Results list. Promote the first error
	// (if any) to the top-level code to preserve the failure signal.
	if req.Version >= 2 {
		for _, r := range results {
			if r.ErrorCode != 0 {
				resp.ErrorCode = r.ErrorCode
				resp.ErrorMessage = r.ErrorMessage
				break
			}
		}
	} else {
		resp.Results = results
	}

	return resp, nil
}
