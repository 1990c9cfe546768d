package api

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/producer"
	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
	"github.com/chime-sched/chime/views/jobquery"
)

// recentJobs gives read-your-writes: the job commands this process
// published recently, by job key. GET .../jobs/{id} answers from here while
// the jobs table does not yet show the command, for at most ttl; after
// that the table is the truth (the scheduler may have rejected the command).
//
// The table shows the command once the command's partition has applied
// job-commands up to its offset: each read of a row says how far its
// partition had applied them before the read (jobquery's Rows), and a
// partition applies its commands in offset order. The row then shows the
// command, or what the scheduler made of it (ignored, rejected), or a
// later command from another client or instance: the table is newer than
// this memory. The command's own id in the row says the same, where the
// reach is not known. A create held in its row until its namespace
// exists (held_command) does not show yet. An upsert that repeats the
// spec of the live job the row is never shows: the scheduler ignores it.
// Nothing is read when a command is accepted: a read there cost the
// schedulers a tenth of their CPU at 2,000 creates a second
// (docs/capacity.md).
//
// A batch of 100,000 creates keeps 100,000 entries for the TTL, while the
// same jobs fire. So the memory holds no pointers the collector must
// follow: entries are fixed-size slots in the order they were put, their
// bytes (key, command id, offset, the encoded row) are appended to large chunks,
// and the index maps a hash of the key to the slot. Kept as a map of
// strings to structs, the entries were 40 % of the objects live during a
// burst, and marking them on every cycle was CPU the fires paid for.
// Entries leave from the front: past ttl on the server's clock, or the
// oldest beyond max; an entry replaced or retired leaves its slot empty
// until the front reaches it.
type recentJobs struct {
	ttl  time.Duration
	max  int
	seed maphash.Seed

	mu sync.Mutex
	// index maps the hash of a key to the sequence number of its slot.
	index map[uint64]uint64
	// slots[i] has sequence number first+i.
	slots []recentSlot
	first uint64
	// chunks[i] is chunk number firstChunk+i; only the last has room.
	chunks     [][]byte
	firstChunk uint64
	// sweep trims by the wall clock while entries are kept, so the memory
	// of a batch goes back after the TTL even if no request comes.
	sweep *time.Timer
}

type recentSlot struct {
	hash uint64
	// at is when the command was accepted, on the server's clock.
	at    int64
	chunk uint64
	off   uint32
	n     uint32
	gone  bool
}

// maxRecentJobs is how many jobs a process remembers (docs/api.md,
// "Read-your-writes"): a whole burst of creates, 100 batches of the
// largest size.
const maxRecentJobs = 100_000

// recentChunk is the size of the chunks entries are appended to.
const recentChunk = 256 << 10

func newRecentJobs(ttl time.Duration, max int) *recentJobs {
	return &recentJobs{ttl: ttl, max: max, seed: maphash.MakeSeed(), index: make(map[uint64]uint64)}
}

// recentEntry is a slot's bytes, decoded: the command's id, whether it
// is an upsert, and where Kafka acknowledged it; state is the row as the
// scheduler is expected to write it, encoded.
type recentEntry struct {
	key, commandID string
	upsert         bool
	partition      int32
	offset         int64
	state          []byte
}

// put remembers cmd, which Kafka acknowledged as at says, and the row it
// is expected to make. A later command of the same job replaces it:
// commands of a job share a partition, and the later one's offset is the
// higher.
func (r *recentJobs) put(cmd *chimev1.JobCommand, at producer.Receipt, state *chimev1.JobState, now time.Time) {
	key := schema.JobKey(cmd.GetNamespace(), cmd.GetJobId())
	h := maphash.String(r.seed, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, _, ok := r.lookup(h, key); ok {
		s.gone = true
	}
	head := binary.AppendUvarint(nil, uint64(len(key)))
	head = append(head, key...)
	head = binary.AppendUvarint(head, uint64(len(cmd.GetCommandId())))
	head = append(head, cmd.GetCommandId()...)
	upsert := byte(0)
	if cmd.GetUpsert() != nil {
		upsert = 1
	}
	head = append(head, upsert)
	head = binary.AppendVarint(head, int64(at.Partition))
	head = binary.AppendVarint(head, at.Offset)
	n := len(head) + schema.Size(state)
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < n {
		r.chunks = append(r.chunks, make([]byte, 0, max(recentChunk, n)))
		last++
	}
	c := r.chunks[last]
	start := len(c)
	c = append(c, head...)
	c, err := schema.MarshalAppend(c, state)
	if err != nil {
		return // cannot happen for a row built here; read-your-writes is best effort
	}
	r.chunks[last] = c
	r.index[h] = r.first + uint64(len(r.slots))
	r.slots = append(r.slots, recentSlot{hash: h, at: now.UnixNano(), chunk: r.firstChunk + uint64(last), off: uint32(start), n: uint32(len(c) - start)})
	r.trim(now)
	if r.sweep == nil {
		r.sweep = time.AfterFunc(r.ttl, r.sweepNow)
	}
}

// sweepNow trims by the wall clock, and runs again while entries remain.
func (r *recentJobs) sweepNow() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trim(time.Now())
	if len(r.slots) == 0 {
		r.sweep = nil
		return
	}
	r.sweep.Reset(r.ttl / 2)
}

// get returns the expected row if the table's row (nil if none), read
// when its partition had applied the job commands up to reached, does not
// show the recent command yet. A row that shows it retires the entry.
func (r *recentJobs) get(key string, row *chimev1.JobState, reached jobquery.Offsets, now time.Time) *chimev1.JobState {
	h := maphash.String(r.seed, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, e, ok := r.lookup(h, key)
	if !ok {
		return nil
	}
	st := new(chimev1.JobState)
	if schema.UnmarshalInternal(e.state, st) != nil || r.expired(s, now) || e.shownBy(row, reached) || e.repeats(row, st) {
		s.gone = true
		delete(r.index, h)
		return nil
	}
	return st
}

// repeats says the entry is an upsert that repeats the spec of the live
// job the table's row is: the scheduler ignores it, so the table will
// never show it and already is the truth.
func (e recentEntry) repeats(row, st *chimev1.JobState) bool {
	return e.upsert && row != nil && row.GetHeldCommand() == nil && !schema.JobEnded(row.GetStatus()) && proto.Equal(row.GetSpec(), st.GetSpec())
}

// shownBy says the table's row, read when its partition had applied the
// job commands up to reached, shows the entry's command (see recentJobs).
func (e recentEntry) shownBy(row *chimev1.JobState, reached jobquery.Offsets) bool {
	if row.GetHeldCommand() != nil {
		return false
	}
	if row != nil && row.GetLastCommandId() == e.commandID {
		return true
	}
	off, ok := reached[e.partition]
	return ok && e.partition >= 0 && e.offset >= 0 && off >= e.offset
}

// expired says s is past the TTL at now (the server's clock).
func (r *recentJobs) expired(s *recentSlot, now time.Time) bool {
	return now.Sub(time.Unix(0, s.at)) > r.ttl
}

// lookup finds key's slot. Two keys with one hash are told apart by the
// key kept in the slot: the later put takes the index, and the earlier is
// forgotten, as read-your-writes may.
func (r *recentJobs) lookup(h uint64, key string) (*recentSlot, recentEntry, bool) {
	seq, ok := r.index[h]
	if !ok {
		return nil, recentEntry{}, false
	}
	s := &r.slots[seq-r.first]
	e, ok := r.decode(s)
	if !ok || e.key != key {
		return nil, recentEntry{}, false
	}
	return s, e, true
}

func (r *recentJobs) decode(s *recentSlot) (recentEntry, bool) {
	b := r.chunks[s.chunk-r.firstChunk][s.off : s.off+s.n]
	var e recentEntry
	field := func() (string, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return "", false
		}
		f := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return f, true
	}
	var ok bool
	if e.key, ok = field(); !ok {
		return e, false
	}
	if e.commandID, ok = field(); !ok {
		return e, false
	}
	if len(b) == 0 {
		return e, false
	}
	e.upsert, b = b[0] == 1, b[1:]
	p, k := binary.Varint(b)
	if k <= 0 {
		return e, false
	}
	b = b[k:]
	e.partition = int32(p)
	if e.offset, k = binary.Varint(b); k <= 0 {
		return e, false
	}
	e.state = b[k:]
	return e, true
}

// trim drops entries from the front: the retired, those past ttl, and the
// oldest while more than max are remembered or the slots (retired ones
// included) are more than twice max. Chunks no slot uses any more go too.
func (r *recentJobs) trim(now time.Time) {
	i := 0
	for ; i < len(r.slots); i++ {
		s := &r.slots[i]
		if !s.gone && !r.expired(s, now) && len(r.index) <= r.max && len(r.slots)-i <= 2*r.max {
			break
		}
		if seq, ok := r.index[s.hash]; ok && seq == r.first+uint64(i) {
			delete(r.index, s.hash)
		}
	}
	if i == 0 {
		return
	}
	clear(r.slots[:i])
	r.slots = r.slots[i:]
	r.first += uint64(i)
	if len(r.slots) == 0 {
		r.slots = nil // lets the array go
	}
	// Chunks before the first slot's are no longer used; the last chunk
	// stays for the next put.
	keep := uint64(len(r.chunks) - 1)
	if len(r.slots) > 0 {
		keep = r.slots[0].chunk - r.firstChunk
	}
	if keep > 0 {
		clear(r.chunks[:keep])
		r.chunks = r.chunks[keep:]
		r.firstChunk += keep
	}
}

func (r *recentJobs) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.index)
}

// remember keeps an upsert Kafka acknowledged as at for read-your-writes.
// Nothing is read: the reads that follow say whether the table shows it
// (recentJobs).
func (s *server) remember(conv *converted, at producer.Receipt, now time.Time) {
	cmd := conv.cmd
	st := &chimev1.JobState{
		Spec:          cmd.GetUpsert().GetSpec(),
		Status:        chimev1.JobStatus_JOB_STATUS_SCHEDULED,
		CreatedAt:     timestamppb.New(now),
		UpdatedAt:     timestamppb.New(now),
		LastCommandId: cmd.GetCommandId(),
	}
	if conv.next != nil {
		t, _ := time.Parse(time.RFC3339Nano, *conv.next)
		st.NextScheduledAt = timestamppb.New(t)
	}
	s.recent.put(cmd, at, st, now)
}
