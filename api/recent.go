package api

import (
	"encoding/binary"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/chime-sched/chime/schema"
	"github.com/chime-sched/chime/schema/chimev1"
)

// recentJobs gives read-your-writes: the job commands this process
// published recently, by job key. GET .../jobs/{id} answers from here while
// the jobs table does not yet show the command, for at most ttl; after
// that the table is the truth (the scheduler may have rejected the command).
//
// The table shows the command once the row's last_command_id is the
// command's, or is none of the ids the row could show before it (the row's
// when the command was accepted, and this process's earlier commands still
// in flight for the job): then a later command, from another client or
// instance, has been applied after it, and the table is newer than this
// memory.
//
// A batch of 100,000 creates keeps 100,000 entries for the TTL, while the
// same jobs fire. So the memory holds no pointers the collector must
// follow: entries are fixed-size slots in the order they were put, their
// bytes (key, command ids, the encoded row) are appended to large chunks,
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

// maxBefore bounds the commands of one job remembered as in flight.
const maxBefore = 16

// recentEntry is a slot's bytes, decoded: before are the last_command_ids
// the row may show while the command is still on its way; state is the
// row as the scheduler is expected to write it, encoded.
type recentEntry struct {
	key, commandID string
	before         []string
	state          []byte
}

// put remembers a command; viewID is the table's last_command_id for the
// job now ("" if it has no row).
func (r *recentJobs) put(key, commandID, viewID string, state *chimev1.JobState, now time.Time) {
	h := maphash.String(r.seed, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	before := []string{viewID}
	if s, old, ok := r.lookup(h, key); ok && !r.expired(s, now) {
		before = append(old.before, old.commandID)
		if !slices.Contains(before, viewID) {
			before = append(before, viewID)
		}
		if len(before) > maxBefore {
			before = before[len(before)-maxBefore:]
		}
		s.gone = true
	}
	head := binary.AppendUvarint(nil, uint64(len(key)))
	head = append(head, key...)
	head = binary.AppendUvarint(head, uint64(len(commandID)))
	head = append(head, commandID...)
	head = binary.AppendUvarint(head, uint64(len(before)))
	for _, b := range before {
		head = binary.AppendUvarint(head, uint64(len(b)))
		head = append(head, b...)
	}
	n := len(head) + schema.Size(state)
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < n {
		r.chunks = append(r.chunks, make([]byte, 0, max(recentChunk, n)))
		last++
	}
	c := r.chunks[last]
	off := len(c)
	c = append(c, head...)
	c, err := schema.MarshalAppend(c, state)
	if err != nil {
		return // cannot happen for a row built here; read-your-writes is best effort
	}
	r.chunks[last] = c
	r.index[h] = r.first + uint64(len(r.slots))
	r.slots = append(r.slots, recentSlot{hash: h, at: now.UnixNano(), chunk: r.firstChunk + uint64(last), off: uint32(off), n: uint32(len(c) - off)})
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

// get returns the expected row if the table's row (nil if none) does not
// show the recent command yet. A row that shows it retires the entry.
func (r *recentJobs) get(key string, row *chimev1.JobState, now time.Time) *chimev1.JobState {
	h := maphash.String(r.seed, key)
	r.mu.Lock()
	s, e, ok := r.lookup(h, key)
	if ok && (r.expired(s, now) || (row != nil && (row.GetLastCommandId() == e.commandID || !slices.Contains(e.before, row.GetLastCommandId())))) {
		s.gone = true
		delete(r.index, h)
		ok = false
	}
	r.mu.Unlock()
	if !ok {
		return nil
	}
	// A slot's bytes never change once written, so they are read
	// outside the lock.
	st := new(chimev1.JobState)
	if schema.UnmarshalInternal(e.state, st) != nil {
		return nil
	}
	return st
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
	count, k := binary.Uvarint(b)
	if k <= 0 || count > maxBefore+1 {
		return e, false
	}
	b = b[k:]
	for range count {
		f, ok := field()
		if !ok {
			return e, false
		}
		e.before = append(e.before, f)
	}
	e.state = b
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

// accepted remembers upserts of one namespace for read-your-writes,
// reading their rows in one call.
func (s *server) accepted(convs []*converted, now time.Time) {
	if len(convs) == 0 {
		return
	}
	ids := make([]string, len(convs))
	for i, conv := range convs {
		ids[i] = conv.cmd.GetJobId()
	}
	// Unread rows only cost memory: each upsert is then remembered.
	rows, err := s.cfg.JobStates.Rows(convs[0].cmd.GetNamespace(), ids)
	if err != nil {
		rows = make([]*chimev1.JobState, len(convs))
	}
	for i, conv := range convs {
		s.remember(conv, rows[i], now)
	}
}

// remember keeps an upsert for read-your-writes, given the job's row as
// the table has it. An upsert that repeats the spec of a live job is not
// remembered: the scheduler ignores it, so the table will never show its
// command and already is the truth.
func (s *server) remember(conv *converted, row *chimev1.JobState, now time.Time) {
	cmd := conv.cmd
	if row != nil && !schema.JobEnded(row.GetStatus()) && proto.Equal(row.GetSpec(), cmd.GetUpsert().GetSpec()) {
		return
	}
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
	s.recent.put(schema.JobKey(cmd.GetNamespace(), cmd.GetJobId()), cmd.GetCommandId(), row.GetLastCommandId(), st, now)
}
