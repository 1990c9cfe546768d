package sarama

// hasRecords says whether a fetch response holds any record (chime's fork,
// CHIME.md): a response of empty blocks, or of errors alone, sends the
// next fetch of a consumer with Consumer.Fetch.IdleWait set into its idle
// wait.
func hasRecords(response *FetchResponse) bool {
	for _, blocks := range response.Blocks {
		for _, block := range blocks {
			if n, err := block.numRecords(); err == nil && n > 0 {
				return true
			}
		}
	}
	return false
}
