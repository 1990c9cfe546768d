package kfake

// CompactPartition compacts one partition of a topic with
// cleanup.policy=compact, as Compact does for every such partition, and
// applies the topic's retention to it. Like Compact it runs in the
// cluster's request loop, which serves nothing else meanwhile; compacting
// the partitions one call at a time lets the requests that arrive between
// the calls through, where Compact holds the loop for the whole pass.
// It reports whether the partition exists and belongs to a compacted
// topic.
//
// Added by chime (see CHIME.md); not in upstream kfake.
func (c *Cluster) CompactPartition(topic string, partition int32) bool {
	var ok bool
	c.admin(func() {
		pd, exists := c.data.tps.getp(topic, partition)
		if !exists || !c.data.isCompactTopic(topic) {
			return
		}
		c.compact(pd, topic)
		c.applyRetention(pd, topic)
		ok = true
	})
	return ok
}
