// The cluster state of the scheduling pass in C++: the twin of
// src/aryl/scheduling/state.py (ClusterState) and scheduling/speed.py (SpeedModel).
//
// Header-only C++17, no Python dependency (bound by _sched.cpp).  Struct of
// vectors indexed by a dense server index 0 .. n_servers-1 or job index
// 0 .. n_jobs-1; int64_t for every count, double for every time and rate.
// External names (job ids) stay in Python.
//
// Bit-identity contract with the Python code (CPP_SPEC.md): every floating-point
// expression is evaluated with the same operations in the same order (build with
// -ffp-contract=off, never -ffast-math); Python's `max(a, b)`, `min(a, b)`, `//`
// and `math.floor` are py_max, py_min, floordiv and std::floor below; iteration
// orders of Python dicts used as ordered sets (queued, running, elastic_running,
// below) are kept by OrderedSet (insertion order, O(1) add/remove); a placement
// (Python dict server -> workers) is a vector of (server, workers) pairs in
// insertion order.
//
// Cross-reference: each function names the Python function it mirrors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aryl {
namespace sched {

using i64 = int64_t;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---------------------------------------------------------------- errors
// Bad input (a plan that does not fit the state ...): aryl.errors.InvalidInputError.
struct InvalidInput : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};
// Python's ZeroDivisionError (e.g. a worker larger than a server in gang_place).
struct ZeroDivision : std::domain_error {
    using std::domain_error::domain_error;
};

// ---------------------------------------------------------------- Python arithmetic
// max(a, b) / min(a, b) of Python: the first argument unless the second is
// strictly larger / smaller (so NaN and signed zeros behave as in Python).
inline double py_max(double a, double b) { return b > a ? b : a; }
inline double py_min(double a, double b) { return b < a ? b : a; }
inline i64 py_max(i64 a, i64 b) { return b > a ? b : a; }
inline i64 py_min(i64 a, i64 b) { return b < a ? b : a; }
// a // b of Python ints (floor division); b == 0 raises ZeroDivision.
inline i64 floordiv(i64 a, i64 b) {
    if (a >= 0 && b > 0) return a / b;  // the usual case: C++ division is the floor
    if (b == 0) throw ZeroDivision("integer division or modulo by zero");
    i64 q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}
inline i64 floormod(i64 a, i64 b) { return a - floordiv(a, b) * b; }

// ---------------------------------------------------------------- statuses
// job status (state.py PENDING .. INFEASIBLE)
enum JobStatus : int8_t { PENDING = 0, QUEUED = 1, RUNNING = 2, DONE = 3, INFEASIBLE = 4 };
// server status (state.py TRAINING .. LOANED)
enum ServerStatus : int8_t { TRAINING = 0, SERVING = 1, IDLE = 2, LOANED = 3 };
// SchedulerConfig.reclaim_policy
enum ReclaimPolicy : int { RECLAIM_ARYL = 0, RECLAIM_RANDOM = 1, RECLAIM_FEWEST_JOBS = 2,
                           RECLAIM_MOST_IDLE = 3, RECLAIM_EXACT = 4 };

// A placement: (server index, workers) in insertion order (a Python dict).
using PlaceEntry = std::pair<i64, i64>;
using Placement = std::vector<PlaceEntry>;

inline i64 place_workers(const Placement& p) {
    i64 w = 0;
    for (const auto& e : p) w += e.second;
    return w;
}
// place.get(s, 0)
inline i64 place_get(const Placement& p, i64 s) {
    for (const auto& e : p)
        if (e.first == s) return e.second;
    return 0;
}
// place[s] = place.get(s, 0) + k (a new key goes last, an existing one keeps its slot)
inline void place_add(Placement& p, i64 s, i64 k) {
    for (auto& e : p)
        if (e.first == s) {
            e.second += k;
            return;
        }
    p.emplace_back(s, k);
}
inline bool place_has(const Placement& p, i64 s) {
    for (const auto& e : p)
        if (e.first == s) return true;
    return false;
}
// dict equality (order-insensitive)
inline bool place_equal(const Placement& a, const Placement& b) {
    if (a.size() != b.size()) return false;
    for (const auto& e : a)
        if (!place_has(b, e.first) || place_get(b, e.first) != e.second) return false;
    return true;
}

namespace detail {
// The index of the lowest set bit of x != 0 (a de Bruijn multiplication: portable).
inline int lowest_bit(uint64_t x) {
    static constexpr int8_t kIndex[64] = {
        0,  1,  48, 2,  57, 49, 28, 3,  61, 58, 50, 42, 38, 29, 17, 4,  62, 55, 59, 36, 53, 51,
        43, 22, 45, 39, 33, 30, 24, 18, 12, 5,  63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21,
        44, 32, 23, 11, 46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9,  13, 8,  7,  6};
    return kIndex[((x & (~x + 1)) * 0x03f79d71b4cb0a89ULL) >> 58];
}
}  // namespace detail

// state.py split_placement: the first `base` workers in ascending server index are
// the base part, the rest the extra part (both in ascending server order).
inline void split_placement(const Placement& place, i64 base, Placement* b, Placement* e) {
    auto walk = [&](i64 s, i64 k, i64& left) {
        const i64 take = k < left ? k : left;
        if (take) {
            if (b) b->emplace_back(s, take);
            left -= take;
        }
        if (k - take && e) e->emplace_back(s, k - take);
    };
    const size_t n = place.size();
    i64 left = base;
    if (b != &place && e != &place && std::is_sorted(place.begin(), place.end())) {
        if (b) b->clear();
        if (e) e->clear();
        for (const auto& en : place) walk(en.first, en.second, left);
        return;
    }
    // Not in ascending order: when the servers are distinct and within 64 indexes of
    // the lowest (the usual case), one bit per server orders them (no sort)
    if (n > 0 && n <= 64) {
        i64 lo = place[0].first, hi = lo;
        for (const auto& en : place) {
            lo = en.first < lo ? en.first : lo;
            hi = en.first > hi ? en.first : hi;
        }
        if (hi - lo < 64) {
            uint64_t mask = 0;
            bool distinct = true;
            i64 k_at[64];  // workers by server - lo (only the servers in mask are read)
            for (const auto& en : place) {
                const uint64_t bit = uint64_t(1) << (en.first - lo);
                distinct = distinct && !(mask & bit);
                mask |= bit;
                k_at[en.first - lo] = en.second;
            }
            if (distinct) {  // (place is read: b or e may be it)
                if (b) b->clear();
                if (e) e->clear();
                for (; mask; mask &= mask - 1) {
                    const int q = detail::lowest_bit(mask);
                    walk(lo + q, k_at[q], left);
                }
                return;
            }
        }
    }
    thread_local Placement sorted_p;
    sorted_p.assign(place.begin(), place.end());
    std::sort(sorted_p.begin(), sorted_p.end());
    if (b) b->clear();
    if (e) e->clear();
    for (const auto& en : sorted_p) walk(en.first, en.second, left);
}

// split_placement(place, base, nullptr, &ex): the extra part only, into ex.  The
// elastic phase builds a placement as its base part in ascending servers, then the
// extras: when the entries up to the one that completes `base` ascend and every
// later server is above them (with workers, as in any placement), those are the
// lowest servers in order, and the extra part (ascending (server, workers) pairs,
// split_placement's order) is the rest of the last of them, then the later entries
// sorted (inserted from the end: they come mostly descending).  Else split_placement.
inline void extra_part(const Placement& place, i64 base, Placement& ex) {
    const size_t n = place.size();
    size_t i = 0;  // the entry that completes the base part
    i64 left = base;
    bool ok = true;
    for (; i < n; ++i) {
        if (i > 0 && place[i].first <= place[i - 1].first) {
            ok = false;
            break;
        }
        if (place[i].second >= left) break;
        left -= place[i].second;
    }
    if (ok && i < n) {
        const i64 pivot = place[i].first;
        for (size_t r = i + 1; r < n; ++r)
            ok &= (place[r].first > pivot) & (place[r].second > 0);
    }
    if (!ok) {
        split_placement(place, base, nullptr, &ex);
        return;
    }
    if (i >= n) {
        ex.clear();
        return;
    }
    const i64 rest = place[i].second - left;  // (its part beyond the base)
    ex.resize((rest != 0) + (n - 1 - i));
    PlaceEntry* out = ex.data();
    size_t m = 0;
    if (rest != 0) out[m++] = PlaceEntry(place[i].first, rest);
    const size_t first = m;
    for (size_t r = n; r-- > i + 1;) {
        const PlaceEntry x = place[r];
        size_t q = m++;
        for (; q > first && x < out[q - 1]; --q) out[q] = out[q - 1];
        out[q] = x;
    }
}

// ---------------------------------------------------------------- slot pool
// Values recycled through a free list and addressed by int32 slots: the store
// behind the per-job tables below (one int32 slot per job into a pool that only
// the jobs holding a value fill).  `Store` is std::vector, or ChunkedStore where
// references to the other slots must stay valid across acquire().
template <class T, class Store = std::vector<T>>
class SlotPool {
public:
    // a slot: a new one holds T(), a recycled one what it held when released (a
    // cleared Placement keeps its buffer); `what` names the values in the error
    // past 2**31 - 1 of them
    int32_t acquire(const char* what) {
        if (!free_.empty()) {
            const int32_t q = free_.back();
            free_.pop_back();
            return q;
        }
        if (store_.size() >= static_cast<size_t>(INT32_MAX))
            throw std::overflow_error(std::string("more than 2**31 - 1 ") + what);
        store_.emplace_back();
        return static_cast<int32_t>(store_.size() - 1);
    }
    // slot q goes back to the pool
    void release(int32_t q) { free_.push_back(q); }
    T& operator[](int32_t q) { return store_[static_cast<size_t>(q)]; }
    const T& operator[](int32_t q) const { return store_[static_cast<size_t>(q)]; }
    size_t n_live() const { return store_.size() - free_.size(); }
    void clear() {
        store_.clear();
        free_.clear();
    }

private:
    Store store_;
    std::vector<int32_t> free_;
};

// Values in chunks of 64 (a Store of SlotPool): references stay valid as it grows
// (as in a std::deque), and an index is a shift and a mask.
template <class T>
class ChunkedStore {
public:
    ChunkedStore() = default;
    ChunkedStore(const ChunkedStore& o) { *this = o; }
    ChunkedStore& operator=(const ChunkedStore& o) {
        if (this == &o) return *this;
        clear();
        for (size_t i = 0; i < o.n_; ++i) {
            emplace_back();
            (*this)[i] = o[i];
        }
        return *this;
    }
    ChunkedStore(ChunkedStore&&) noexcept = default;
    ChunkedStore& operator=(ChunkedStore&&) noexcept = default;
    size_t size() const { return n_; }
    void emplace_back() {
        if (n_ == chunks_.size() * kChunk) chunks_.emplace_back(new T[kChunk]);
        ++n_;
    }
    T& operator[](size_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }
    const T& operator[](size_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
    void clear() {
        chunks_.clear();
        n_ = 0;
    }

private:
    static constexpr size_t kShift = 6, kChunk = size_t(1) << kShift;
    std::vector<std::unique_ptr<T[]>> chunks_;
    size_t n_ = 0;
};

// ---------------------------------------------------------- placement table
// Per-job placements (or extra parts) where most jobs have none: one int32
// slot per job (-1 = empty) into a pool of Placements that only the placed
// jobs hold, recycled when a job's entry is cleared (4 B a job instead of an
// empty std::vector's 24).  Reads return the empty Placement for a job
// without a slot; mut() gives a job a slot (a ChunkedStore: references to
// the other slots stay valid); an entry left empty by a writer reads the same as
// one without a slot.
class PlacementTable {
public:
    void resize(size_t n) { slot_.resize(n, -1); }
    void assign(size_t n, const Placement&) {
        slot_.assign(n, -1);
        pool_.clear();
    }
    size_t size() const { return slot_.size(); }
    const Placement& operator[](size_t j) const {
        const int32_t s = slot_[j];
        return s < 0 ? kEmpty : pool_[s];
    }
    Placement& mut(size_t j) {
        int32_t& s = slot_[j];
        if (s < 0) s = pool_.acquire("placements");
        return pool_[s];
    }
    void clear(size_t j) {
        int32_t& s = slot_[j];
        if (s < 0) return;
        pool_[s].clear();
        pool_.release(s);
        s = -1;
    }
    void set(size_t j, const Placement& p) {
        if (p.empty()) clear(j);
        else mut(j) = p;
    }
    // set(j, p) without copying: p's buffer becomes j's entry and p is left with
    // the buffer j's entry had (unspecified entries: a moved-from value)
    void take(size_t j, Placement&& p) {
        if (p.empty()) clear(j);
        else std::swap(mut(j), p);
    }
    void clear_all() {
        for (size_t j = 0; j < slot_.size(); ++j) clear(j);
    }

private:
    // (a class member, not a function's static: no initialization guard to test)
    static inline const Placement kEmpty{};
    std::vector<int32_t> slot_;
    SlotPool<Placement, ChunkedStore<Placement>> pool_;
};

// ---------------------------------------------------------------- ordered set
// A Python dict used as an ordered set of dense indexes (dict[int, None]):
// insertion order, add() of a present key keeps its slot, O(1) add/remove/contains.
// Memory: one int32 slot per index (-1 = absent) into a pool of list nodes that
// only the members hold (recycled on removal): 4 bytes an index plus 12 a
// member, instead of two int32 links for every index.
class OrderedSet {
public:
    void resize(i64 n) { slot_.resize(static_cast<size_t>(n), -1); }
    i64 capacity() const { return static_cast<i64>(slot_.size()); }
    bool contains(i64 j) const {  // (j < 0 converts to an unsigned value past the size)
        return static_cast<uint64_t>(j) < slot_.size() && slot_[static_cast<size_t>(j)] >= 0;
    }
    void add(i64 j) {
        if (contains(j)) return;
        if (j > static_cast<i64>(INT32_MAX))
            throw std::overflow_error("an ordered set index outside the int32 range: " +
                                      std::to_string(j));
        const int32_t q = nodes_.acquire();
        Node& nd = nodes_[q];
        nd.job = static_cast<int32_t>(j);
        nd.prev = tail_;
        nd.next = -1;
        if (tail_ >= 0) nodes_[tail_].next = q;
        else head_ = q;
        tail_ = q;
        slot_[static_cast<size_t>(j)] = q;
        ++size_;
    }
    // dict.pop(j, None) / del: removes j if present; returns whether it was
    bool remove(i64 j) {
        if (static_cast<uint64_t>(j) >= slot_.size()) return false;  // (as in contains)
        int32_t& sl = slot_[static_cast<size_t>(j)];
        const int32_t q = sl;
        if (q < 0) return false;
        const Node nd = nodes_[q];
        if (nd.prev >= 0) nodes_[nd.prev].next = nd.next;
        else head_ = nd.next;
        if (nd.next >= 0) nodes_[nd.next].prev = nd.prev;
        else tail_ = nd.prev;
        sl = -1;
        nodes_.release(q);
        --size_;
        return true;
    }
    // dict.pop(j, None) then dict[j] = None: j last (added if absent)
    void move_to_back(i64 j) {
        if (!contains(j)) {
            add(j);
            return;
        }
        const int32_t q = slot_[static_cast<size_t>(j)];
        if (q == tail_) return;
        Node& nd = nodes_[q];
        // unlink (q is not the tail: it has a next)
        if (nd.prev >= 0) nodes_[nd.prev].next = nd.next;
        else head_ = nd.next;
        nodes_[nd.next].prev = nd.prev;
        // relink last
        nd.prev = tail_;
        nd.next = -1;
        nodes_[tail_].next = q;
        tail_ = q;
    }
    void clear() {
        for (int32_t q = head_; q >= 0; q = nodes_[q].next)
            slot_[static_cast<size_t>(nodes_[q].job)] = -1;
        nodes_.clear();
        head_ = tail_ = -1;
        size_ = 0;
    }
    i64 size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // the first member (-1: none) and the member after member j (-1: none)
    i64 first() const { return head_ < 0 ? -1 : nodes_[head_].job; }
    i64 next(i64 j) const {
        const int32_t n = nodes_[slot_[static_cast<size_t>(j)]].next;
        return n < 0 ? -1 : nodes_[n].job;
    }

    class iterator {
    public:
        iterator(const OrderedSet* s, int32_t q) : s_(s), q_(q) {}
        i64 operator*() const { return s_->nodes_[q_].job; }
        iterator& operator++() {
            q_ = s_->nodes_[q_].next;
            return *this;
        }
        bool operator!=(const iterator& o) const { return q_ != o.q_; }
        bool operator==(const iterator& o) const { return q_ == o.q_; }

    private:
        const OrderedSet* s_;
        int32_t q_;
    };
    iterator begin() const { return iterator(this, head_); }
    iterator end() const { return iterator(this, -1); }
    std::vector<i64> to_vector() const {
        std::vector<i64> v;
        v.reserve(static_cast<size_t>(size_));
        for (i64 j : *this) v.push_back(j);
        return v;
    }

private:
    struct Node {
        int32_t job = -1, prev = -1, next = -1;
    };
    // The members' nodes, a removed member's recycled through a list linked by the
    // free nodes' `next` (a SlotPool's free list without a vector of its own to grow)
    class NodePool {
    public:
        int32_t acquire() {
            if (free_ >= 0) {
                const int32_t q = free_;
                free_ = v_[static_cast<size_t>(q)].next;
                return q;
            }
            if (v_.size() >= static_cast<size_t>(INT32_MAX))
                throw std::overflow_error("more than 2**31 - 1 members of an ordered set");
            v_.emplace_back();
            return static_cast<int32_t>(v_.size() - 1);
        }
        void release(int32_t q) {
            v_[static_cast<size_t>(q)].next = free_;
            free_ = q;
        }
        Node& operator[](int32_t q) { return v_[static_cast<size_t>(q)]; }
        const Node& operator[](int32_t q) const { return v_[static_cast<size_t>(q)]; }
        void clear() {
            v_.clear();
            free_ = -1;
        }

    private:
        std::vector<Node> v_;
        int32_t free_ = -1;  // the first free node, -1: none
    };
    std::vector<int32_t> slot_;  // per index: its node, -1 = absent
    NodePool nodes_;  // the members' nodes, recycled on removal
    int32_t head_ = -1, tail_ = -1;
    i64 size_ = 0;
};

// ---------------------------------------------------------------- configuration
// state.py SchedulerConfig
struct Config {
    double rescale_pause_s = 30.0;
    double checkpoint_interval_s = 1800.0;
    double restart_cost_s = 60.0;
    i64 loan_reserve_servers = 1;
    double loan_cooldown_s = 600.0;
    double starvation_bound_s = 4 * 3600.0;
    int reclaim_policy = RECLAIM_ARYL;
    i64 seed = 0;
    bool mix_gpu_types = false;
};

// ---------------------------------------------------------------- speed model
// speed.py SpeedModel, for a state whose model is not trivial (Python: speeds is
// not None).  Types are the state's GPU type indexes, plus one slot
// (ref_type) for the reference type when no server has it.  Measured speeds
// come as look-up tables built by the Python model (the same floats):
// lut[family][type][r] = relative_speed * S(r replicas), r = w * g, lut[.][.][0] = 0.
struct SpeedModel {
    std::vector<double> factor;  // per type (1.0 unless given)
    i64 ref_type = 0;            // the reference GPU type's index
    std::vector<std::vector<std::vector<double>>> lut;  // [family][type] -> by replicas

    // SpeedModel.throughput
    double throughput(i64 family, double alpha, i64 type, i64 w, i64 g) const {
        if (family < 0) {
            const double t = w > 0 ? static_cast<double>(w) / (1.0 + alpha * static_cast<double>(w - 1))
                                   : 0.0;
            const double f = factor[static_cast<size_t>(type)];
            return f == 1.0 ? t : f * t;
        }
        const i64 r = w * g;
        if (r <= 0) return 0.0;
        const auto& row = lut[static_cast<size_t>(family)][static_cast<size_t>(type)];
        if (r >= static_cast<i64>(row.size()))
            throw std::out_of_range("speed model: replica count beyond the measured table built");
        return row[static_cast<size_t>(r)];
    }
};

// T(w) of one job (state.py throughput_1)
inline double throughput_1(i64 w, double alpha) {
    return static_cast<double>(w) / (1.0 + alpha * static_cast<double>(w - 1));
}

// ---------------------------------------------------------------- queue indexes
// state.py qidx / sorted_queue: the queued jobs sorted by (key, job).  Keys are
// functions of fields that do not change while a job waits, so a key is
// recomputed (bit-identical) at dequeue instead of stored.
enum QueueKey : int { Q_ARRIVAL = 0, Q_WAIT_ORIGIN = 1, Q_SJF_RIGID = 2, Q_SJF_ELASTIC = 3,
                      Q_LAS = 4, N_QUEUE_KEYS = 5 };
using QueueEntry = std::pair<double, i64>;

// Allocator of single nodes that recycles them through the free list of the queue
// index that owns the set (a queue index inserts and erases a node per enqueue /
// start: no malloc then).  Not a thread_local list: in a shared library every
// access of one is a __tls_get_addr call.  A node is plain memory from operator
// new, so any list may take any node: the allocators compare equal (a set moved
// or swapped keeps its own list and the other set's nodes).
struct NodeFreeList {
    std::vector<void*> v;
    NodeFreeList() = default;
    NodeFreeList(const NodeFreeList&) = delete;
    NodeFreeList& operator=(const NodeFreeList&) = delete;
    ~NodeFreeList() {
        for (void* p : v) ::operator delete(p);
    }
};
template <class T>
struct NodeAllocator {
    using value_type = T;
    NodeFreeList* fl = nullptr;  // nullptr: no recycling
    NodeAllocator() noexcept = default;
    explicit NodeAllocator(NodeFreeList* f) noexcept : fl(f) {}
    template <class U>
    NodeAllocator(const NodeAllocator<U>& o) noexcept : fl(o.fl) {}
    T* allocate(std::size_t n) {
        if (n == 1 && fl != nullptr && !fl->v.empty()) {
            void* p = fl->v.back();
            fl->v.pop_back();
            return static_cast<T*>(p);
        }
        return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n == 1 && fl != nullptr) {
            try {
                fl->v.push_back(p);
                return;
            } catch (...) {
            }
        }
        ::operator delete(p);
    }
};
template <class T, class U>
bool operator==(const NodeAllocator<T>&, const NodeAllocator<U>&) noexcept { return true; }
template <class T, class U>
bool operator!=(const NodeAllocator<T>&, const NodeAllocator<U>&) noexcept { return false; }

using QueueSet = std::set<QueueEntry, std::less<QueueEntry>, NodeAllocator<QueueEntry>>;

// The queued jobs sorted by (key, job): a sorted vector when built (one pass
// that only reads it allocates no node), turned into a balanced tree on the first
// insertion or removal (the simulator keeps it up to date by enqueue / start).
// Iterate it with a range-for: entries (key, job) ascending.
class QueueIndex {
public:
    QueueIndex() : fl_(new NodeFreeList), set_(std::less<QueueEntry>(), NodeAllocator<QueueEntry>(fl_.get())) {}
    // (a copy or move has its own free list: the set is copied into a set of its own)
    QueueIndex(const QueueIndex& o) : QueueIndex() { *this = o; }
    QueueIndex& operator=(const QueueIndex& o) {
        flat_v_ = o.flat_v_;
        set_ = o.set_;  // (the set keeps its allocator: no propagation on copy)
        flat_ = o.flat_;
        return *this;
    }
    class iterator {
    public:
        iterator(const QueueEntry* p, QueueSet::const_iterator it, bool flat)
            : p_(p), it_(it), flat_(flat) {}
        const QueueEntry& operator*() const { return flat_ ? *p_ : *it_; }
        const QueueEntry* operator->() const { return &**this; }
        iterator& operator++() {
            if (flat_) ++p_;
            else ++it_;
            return *this;
        }
        bool operator!=(const iterator& o) const { return flat_ ? p_ != o.p_ : it_ != o.it_; }
        bool operator==(const iterator& o) const { return !(*this != o); }

    private:
        const QueueEntry* p_;
        QueueSet::const_iterator it_;
        bool flat_;
    };
    iterator begin() const {
        return flat_ ? iterator(flat_v_.data(), set_.end(), true) : iterator(nullptr, set_.begin(), false);
    }
    iterator end() const {
        return flat_ ? iterator(flat_v_.data() + flat_v_.size(), set_.end(), true)
                     : iterator(nullptr, set_.end(), false);
    }
    size_t size() const { return flat_ ? flat_v_.size() : set_.size(); }
    bool empty() const { return size() == 0; }
    void clear() {
        flat_v_.clear();
        set_.clear();
        flat_ = true;
    }
    // Replace the content by `sorted` (ascending, unique).
    void assign_sorted(std::vector<QueueEntry>& sorted) {
        set_.clear();
        flat_v_.swap(sorted);
        flat_ = true;
    }
    void insert(const QueueEntry& e) {
        to_tree();
        set_.insert(e);
    }
    void erase(const QueueEntry& e) {
        to_tree();
        // (find + erase at the node: one descent, where erase(key) walks an equal_range)
        const auto it = set_.find(e);
        if (it != set_.end()) set_.erase(it);
    }
    bool operator==(const QueueIndex& o) const {
        if (size() != o.size()) return false;
        auto a = begin(), b = o.begin();
        for (; a != end(); ++a, ++b)
            if (*a != *b) return false;
        return true;
    }
    bool operator!=(const QueueIndex& o) const { return !(*this == o); }

private:
    void to_tree() {
        if (!flat_) return;
        set_.clear();
        for (const auto& e : flat_v_) set_.emplace_hint(set_.end(), e);
        flat_v_.clear();
        flat_ = false;
    }
    std::unique_ptr<NodeFreeList> fl_;  // (before set_: the set's nodes go back to it)
    std::vector<QueueEntry> flat_v_;
    QueueSet set_;
    bool flat_ = true;
};

// A per-job integer column kept as int32 (4 bytes a job instead of 8) and read as
// i64: every read widens, so arithmetic on the values is the same as on a
// vector<i64>.  Writes go through set() / add(), which check that the value fits
// (job sizes are bounded by state.py MAX_WORKERS = 2**31 - 1 and
// MAX_SERVER_GPUS = 2**20; an overflow is an error, never a wrapped value).
class I32Column {
public:
    I32Column() = default;
    size_t size() const { return v_.size(); }
    bool empty() const { return v_.empty(); }
    void resize(size_t n, i64 fill) { v_.resize(n, narrow(fill)); }
    void assign(size_t n, i64 fill) { v_.assign(n, narrow(fill)); }
    void push_back(i64 x) { v_.push_back(narrow(x)); }
    void clear() { v_.clear(); }
    // free the memory (size 0)
    void release() { std::vector<int32_t>().swap(v_); }
    // hand the values over, without a copy (size 0 after)
    std::vector<int32_t> take() {
        std::vector<int32_t> out;
        out.swap(v_);
        return out;
    }
    i64 operator[](size_t i) const { return v_[i]; }
    void set(size_t i, i64 x) { v_[i] = narrow(x); }
    void add(size_t i, i64 k) { v_[i] = narrow(static_cast<i64>(v_[i]) + k); }
    bool operator==(const I32Column& o) const { return v_ == o.v_; }
    bool operator!=(const I32Column& o) const { return v_ != o.v_; }
    // the values as i64 (a copy)
    std::vector<i64> to_i64() const { return std::vector<i64>(v_.begin(), v_.end()); }

private:
    // (the check inline, the error out of line: a write is a compare and a store)
    static int32_t narrow(i64 x) {
        if (x < static_cast<i64>(INT32_MIN) || x > static_cast<i64>(INT32_MAX)) overflow(x);
        return static_cast<int32_t>(x);
    }
    [[noreturn]] static void overflow(i64 x) {
        throw std::overflow_error("a per-job count outside the int32 range: " + std::to_string(x));
    }
    std::vector<int32_t> v_;
};

// ---------------------------------------------------------------- job records
// The per-job values that only a started job has (its progress, speed and
// checkpoint, GPU-seconds clock, start sequence, restart flag): one record per
// job that holds them, through an int32 slot per job (-1 = none) into a pool
// recycled when a record is released, so that the jobs not yet started and (in
// the simulator) the finished ones cost 4 bytes instead of ~49.  A job without a record reads the values that
// add_job gives (checkpoint_remaining_s: its remaining_s; see JobRecords::get).
struct JobRecord {
    double progress_at_s = 0.0, speed = 0.0, checkpoint_remaining_s = 0.0,
           next_checkpoint_s = kInf, attained_at_s = 0.0;
    i64 run_seq = -1;  // position in start order (for "sorted by running rank")
    i64 fin_seq = -1;  // the simulator's live FINISH event (-1: none)
    uint8_t restarted = 0;
};

// aryl.elastic.throughput on w workers, ``w / (1.0 + alpha * (w - 1.0))`` in float64
// (the homogeneous rows of kernels._table)
inline double elastic_throughput(i64 w, double alpha) {
    const double x = static_cast<double>(w);
    return x / (1.0 + alpha * (x - 1.0));
}

class JobRecords {
public:
    void resize(size_t n) { slot_.resize(n, -1); }
    size_t size() const { return slot_.size(); }
    // the record of job j, nullptr when it has none
    const JobRecord* get(size_t j) const {
        const int32_t s = slot_[j];
        return s < 0 ? nullptr : &pool_[s];
    }
    // the record of job j, created with add_job's values (remaining: the job's
    // remaining_s) if it has none.  The reference is valid until the next mut()
    // of another job.
    JobRecord& mut(size_t j, double remaining) {
        const int32_t s = slot_[j];
        return s >= 0 ? pool_[s] : create(j, remaining);
    }
    // job j reads add_job's values again; its record goes back to the pool
    void release(size_t j) {
        int32_t& s = slot_[j];
        if (s < 0) return;
        pool_.release(s);
        s = -1;
    }
    size_t n_records() const { return pool_.n_live(); }

    // elastic_throughput(base + c, alpha) for c = 0..n - 1 (at least) of job j: the
    // throughputs of a running elastic job's row of the JCT-reduction table, read at
    // every elastic phase (sched_aryl.hpp elastic_phase).  Kept beside the job's
    // record (one row per record slot, freed with the records), computed again for
    // another (alpha, base) (a recycled slot, a job set again) or a larger n: a value
    // is the one expression on the same two inputs, the same float whenever it is
    // computed (alpha 0.0 and -0.0 give the same row; a NaN alpha never matches:
    // computed every time).  nullptr for a job without a record.  (mutable: a cache
    // of the job's own fields, filled by a const pass.)
    const double* throughput_row(size_t j, double alpha, i64 base, i64 n) const {
        const int32_t s = slot_[j];
        if (s < 0) return nullptr;
        const auto q = static_cast<size_t>(s);
        if (q >= tput_.size()) tput_.resize(q + 1);
        TputRow& row = tput_[q];
        if (row.n < n || !(row.alpha == alpha) || row.base != base) fill(row, alpha, base, n);
        return row.t.get();
    }

private:
    // mut() of a job without a record
    JobRecord& create(size_t j, double remaining) {
        int32_t& s = slot_[j];
        s = pool_.acquire("job records");
        pool_[s] = JobRecord();
        pool_[s].checkpoint_remaining_s = remaining;
        return pool_[s];
    }
    struct TputRow {
        double alpha = 0.0;
        i64 base = 0, n = 0;  // t[c] on base + c workers, c < n
        std::unique_ptr<double[]> t;
    };
    static void fill(TputRow& row, double alpha, i64 base, i64 n) {
        if (n > row.n) {
            row.t.reset(new double[static_cast<size_t>(n)]);
            row.n = n;
        }
        row.alpha = alpha;
        row.base = base;
        for (i64 c = 0; c < row.n; ++c) row.t[static_cast<size_t>(c)] = elastic_throughput(base + c, alpha);
    }
    std::vector<int32_t> slot_;
    SlotPool<JobRecord> pool_;
    mutable std::vector<TputRow> tput_;  // by record slot
};

// A read-only per-job column over a JobRecords field (st.speed[j] ...): the
// record's value, or `dflt` for a job without a record.  It points into its
// State: a State is not copy-constructible (built in place), but assignable.
template <class T, T JobRecord::*F>
class RecordField {
public:
    RecordField(const JobRecords* r, T dflt) : r_(r), dflt_(dflt) {}
    RecordField(const RecordField&) = delete;
    // (assigning a State assigns its records: the column keeps pointing at its own)
    RecordField& operator=(const RecordField&) { return *this; }
    T operator[](size_t j) const {
        const JobRecord* p = r_->get(j);
        return p ? p->*F : dflt_;
    }
    size_t size() const { return r_->size(); }

private:
    const JobRecords* r_;
    T dflt_;
};
// checkpoint_remaining_s: without a record, the job's remaining_s
class CheckpointField {
public:
    CheckpointField(const JobRecords* r, const std::vector<double>* rem) : r_(r), rem_(rem) {}
    CheckpointField(const CheckpointField&) = delete;
    CheckpointField& operator=(const CheckpointField&) { return *this; }
    double operator[](size_t j) const {
        const JobRecord* p = r_->get(j);
        return p ? p->checkpoint_remaining_s : (*rem_)[j];
    }

private:
    const JobRecords* r_;
    const std::vector<double>* rem_;
};

// ---------------------------------------------------------------- gather rows
// What the elastic phase reads of one running elastic job for its row of the
// JCT-reduction table (sched_aryl.hpp ArylPass::elastic_phase), in one record
// instead of ~10 per-job columns and records: remaining_work's inputs (the job's
// remaining_s, its record's progress_at_s and speed, ref_throughput), base and
// maximum workers, GPUs per worker, current workers, and its homogeneous
// throughputs elastic_throughput(base + c, alpha) for c = 0..n_tput - 1 (the same
// expression on the same inputs as every other row of them: the same floats),
// computed as far as a table has needed them (State::gather_tput): never sized by
// max_workers, which may be 2**31 - 1 where only a few workers can be placed.
struct alignas(64) GatherRow {
    // three cache lines: the gather's values in the first, then alpha (read only when
    // throughputs are computed) and the first N_INLINE throughputs in the record
    // itself (a row is one block: the usual K = 12 fits); past them all of them are
    // in GatherRows' heap buffer of the row's slot, which heap then points to
    // (nullptr while they fit inline)
    static constexpr i64 N_INLINE = 15;
    const double* heap = nullptr;
    double remaining_s = 0.0, progress_at_s = 0.0, speed = 0.0, ref_throughput = 0.0;
    int32_t base = 0, max_workers = 0, gpus = 0, workers = 0;
    i64 n_tput = 0;  // throughputs in tput() (c = 0..n_tput - 1)
    double alpha = 0.0;
    double inl[N_INLINE];
    // (no self-pointer: the inline buffer moves with the record when rows_ grows)
    const double* tput() const { return heap != nullptr ? heap : inl; }
};
static_assert(sizeof(GatherRow) == 192, "GatherRow: three cache lines");

// The GatherRows of the jobs of State::elastic_running that the elastic phase read
// (by job: an int32 slot per job, -1 = none, into rows recycled as jobs come and
// go): made by State::gather_row on first use, dropped by preempt, finish, set_job
// and rebuild_indexes, their progress values and workers kept by State::sync_gather
// wherever State changes them.
class GatherRows {
public:
    GatherRows() = default;
    GatherRows(const GatherRows& o) { *this = o; }
    // a move keeps the throughput buffers where they are (the rows' pointers stay right)
    GatherRows(GatherRows&&) noexcept = default;
    GatherRows& operator=(GatherRows&&) noexcept = default;
    GatherRows& operator=(const GatherRows& o) {
        if (this == &o) return *this;
        slot_ = o.slot_;
        rows_ = o.rows_;
        tput_ = o.tput_;
        free_ = o.free_;
        for (size_t q = 0; q < rows_.size(); ++q)  // ours
            if (rows_[q].heap != nullptr) rows_[q].heap = tput_[q].data();
        return *this;
    }
    void resize(size_t n) { slot_.resize(n, -1); }
    // room for n more rows without moving the others: a table's rows point into
    // their records' inline throughputs (State::gather_reserve), which must stay put
    // while the gather makes rows for the later candidates
    void reserve_new(size_t n) {
        const size_t want = rows_.size() + n;
        if (rows_.capacity() < want) rows_.reserve(std::max(want, 2 * rows_.capacity()));
    }
    // job j's row, nullptr when it has none
    const GatherRow* get(size_t j) const {
        const int32_t s = slot_[j];
        return s < 0 ? nullptr : &rows_[static_cast<size_t>(s)];
    }
    GatherRow* mut(size_t j) {
        const int32_t s = slot_[j];
        return s < 0 ? nullptr : &rows_[static_cast<size_t>(s)];
    }
    // job j's row (created if it has none) with its static values and throughputs;
    // the progress values and workers are the caller's to set
    GatherRow& add(size_t j, i64 base, i64 max_w, i64 gpus, double alpha, double ref_tp) {
        int32_t& s = slot_[j];
        if (s < 0) {
            if (!free_.empty()) {
                s = free_.back();
                free_.pop_back();
            } else {
                if (rows_.size() >= static_cast<size_t>(INT32_MAX))
                    throw std::overflow_error("more than 2**31 - 1 gather rows");
                s = static_cast<int32_t>(rows_.size());
                rows_.emplace_back();
                tput_.emplace_back();
            }
        }
        const auto q = static_cast<size_t>(s);
        GatherRow& r = rows_[q];
        tput_[q].clear();
        r.heap = nullptr;
        r.n_tput = 0;
        r.alpha = alpha;
        r.ref_throughput = ref_tp;
        r.base = static_cast<int32_t>(base);
        r.max_workers = static_cast<int32_t>(max_w);
        r.gpus = static_cast<int32_t>(gpus);
        return r;
    }
    // job j's row (it has one) with its throughputs for c = 0..n - 1 at least (n <=
    // max - base + 1): the missing ones computed, the buffer grown at least twofold
    // (a job's tables grow a little at a time) but never past max - base + 1
    const GatherRow& grow_tput(size_t j, i64 n) {
        const auto q = static_cast<size_t>(slot_[j]);
        GatherRow& r = rows_[q];
        const i64 top = static_cast<i64>(r.max_workers) - r.base + 1;
        const i64 want = std::min(top, std::max(n, 2 * r.n_tput));
        if (want <= GatherRow::N_INLINE) {
            for (i64 c = r.n_tput; c < want; ++c)
                r.inl[c] = elastic_throughput(r.base + c, r.alpha);
        } else {
            std::vector<double>& t = tput_[q];
            if (r.heap == nullptr) t.assign(r.inl, r.inl + r.n_tput);
            t.resize(static_cast<size_t>(want));
            for (i64 c = r.n_tput; c < want; ++c)
                t[static_cast<size_t>(c)] = elastic_throughput(r.base + c, r.alpha);
            r.heap = t.data();
        }
        r.n_tput = want;
        return r;
    }
    // check_indexes: job j's row (it has one) keeps its throughputs in its own storage
    bool owns_tput(size_t j) const {
        const auto q = static_cast<size_t>(slot_[j]);
        const GatherRow& r = rows_[q];
        return r.n_tput <= GatherRow::N_INLINE
                   ? r.heap == nullptr
                   : r.heap == tput_[q].data() && static_cast<i64>(tput_[q].size()) == r.n_tput;
    }
    void release(size_t j) {
        int32_t& s = slot_[j];
        if (s < 0) return;
        free_.push_back(s);
        s = -1;
    }
    void clear() {
        std::fill(slot_.begin(), slot_.end(), -1);
        rows_.clear();
        tput_.clear();
        free_.clear();
    }
    size_t n_rows() const { return rows_.size() - free_.size(); }

private:
    std::vector<int32_t> slot_;
    std::vector<GatherRow> rows_;            // by slot
    std::vector<std::vector<double>> tput_;  // by slot: the rows' throughputs
    std::vector<int32_t> free_;
};

// ---------------------------------------------------------------- the state
// state.py ClusterState
struct State {
    double now_s = 0.0;
    Config config;
    bool has_speeds = false;  // Python: speeds is not None
    SpeedModel speeds;

    // GPU types, in server order
    std::vector<std::string> gpu_types;
    std::vector<std::vector<i64>> servers_by_type;   // every server of a type, ascending
    std::vector<std::vector<i64>> training_by_type;  // training servers of a type

    // servers
    std::vector<i64> server_type;  // index into gpu_types
    std::vector<i64> server_gpus;
    std::vector<int8_t> server_status;
    std::vector<double> server_reclaimed_s;
    std::vector<i64> training_servers;
    i64 training_gpus = 0;
    std::vector<i64> free;
    // per server: (job, workers), in no particular order (Python's dict keeps
    // insertion order, but no reader depends on it: the reclaim code sorts a
    // server's jobs by run_seq (unique), set_short sorts what it collects, the
    // rest looks up a job or reads emptiness or size); so an entry leaves by
    // taking the last one's slot, and a resize that keeps a job's workers on a
    // server leaves its entry alone
    std::vector<Placement> jobs_on;
    i64 n_loaned = 0;
    std::vector<i64> on_loan;  // the n_loaned LOANED servers, ascending (loaned_servers())
    i64 loaned_gpus = 0;
    i64 n_pools = 0;
    std::vector<i64> server_pool_idx;
    std::vector<i64> busy_by_pool;
    std::vector<i64> loaned_gpus_by_pool;
    double last_reclaim_s = -kInf;
    // inference side
    i64 servers_needed = 0;
    double reclaim_deadline_s = kInf;
    // state.py reclaim_requests: (deadline_s, n_servers), ascending deadline
    std::vector<std::pair<double, i64>> reclaim_requests;

    // jobs (static)
    std::vector<double> arrival_s;
    // (int32 columns: I32Column)
    I32Column gpus_per_worker, min_workers, max_workers, ref_workers;
    std::vector<uint8_t> elastic;
    std::vector<double> alpha;
    I32Column family;  // model family index, -1 = None
    std::vector<double> ref_throughput;
    // jobs (dynamic)
    std::vector<int8_t> status;
    I32Column workers;
    PlacementTable placement;  // empty = None
    std::vector<double> remaining_s;
    std::vector<double> queued_since_s, waited_s, attained_gpu_s;
    // a started job's values (JobRecords): read as columns, written through rec()
    JobRecords records;
    RecordField<double, &JobRecord::progress_at_s> progress_at_s{&records, 0.0};
    RecordField<double, &JobRecord::speed> speed{&records, 0.0};
    CheckpointField checkpoint_remaining_s{&records, &remaining_s};
    RecordField<double, &JobRecord::next_checkpoint_s> next_checkpoint_s{&records, kInf};
    RecordField<double, &JobRecord::attained_at_s> attained_at_s{&records, 0.0};
    RecordField<i64, &JobRecord::run_seq> run_seq{&records, -1};
    RecordField<uint8_t, &JobRecord::restarted> restarted{&records, 0};
    OrderedSet queued, running;
    i64 next_run_seq = 0;
    // derived
    i64 busy = 0, base_busy = 0, busy_loaned = 0;
    std::vector<i64> ex_srv;          // GPUs of extra workers per server
    i64 ex_gpus = 0;                  // sum(ex_srv): GPUs of every extra worker
    PlacementTable ex_job;    // extra part per job (empty = not in Python's ex_job)
    i64 n_ex_job = 0;                 // len(ex_job)
    OrderedSet below, elastic_running;
    // the elastic phase's rows of elastic running jobs (gather_row; mutable: a cache
    // of the jobs' own values, made by a const pass, kept by sync_gather)
    mutable GatherRows gather;
    // queue indexes (built on first use; LAS thresholds of the built index)
    // (mutable: a cache of the state's own content, built by a const pass)
    mutable QueueIndex qidx[N_QUEUE_KEYS];
    mutable bool qidx_built[N_QUEUE_KEYS] = {false, false, false, false, false};
    mutable std::vector<double> las_thresholds;
    // the elastic phase's memo (free GPUs left, servers on loan or offered)
    i64 memo_left = -1, memo_loaned = -1;
    // resize's scratch per server (0 between calls)
    std::vector<i64> resize_mark;
    Placement resize_copy;  // resize(j, const Placement&): the copy it takes

    // ------------------------------------------------------------ building
    i64 n_servers() const { return static_cast<i64>(server_gpus.size()); }
    i64 n_jobs() const { return static_cast<i64>(arrival_s.size()); }
    i64 n_training() const { return static_cast<i64>(training_servers.size()); }
    i64 n_types() const { return static_cast<i64>(gpu_types.size()); }

    // state.py add_server (validated by the caller): pool index and type index given;
    // pools and types are numbered in order of first server.
    i64 add_server(bool training, i64 gpus, i64 pool_idx, i64 type_idx, int8_t st,
                   double reclaimed_s) {
        const i64 i = n_servers();
        if (pool_idx >= n_pools) n_pools = pool_idx + 1;
        if (busy_by_pool.size() < static_cast<size_t>(n_pools))
            busy_by_pool.resize(static_cast<size_t>(n_pools), 0);
        if (loaned_gpus_by_pool.size() < static_cast<size_t>(n_pools))
            loaned_gpus_by_pool.resize(static_cast<size_t>(n_pools), 0);
        server_pool_idx.push_back(pool_idx);
        const auto nt = static_cast<size_t>(type_idx + 1);
        if (servers_by_type.size() < nt) servers_by_type.resize(nt);
        if (training_by_type.size() < nt) training_by_type.resize(nt);
        if (gpu_types.size() < nt) gpu_types.resize(nt);
        server_type.push_back(type_idx);
        servers_by_type[static_cast<size_t>(type_idx)].push_back(i);
        if (training) training_by_type[static_cast<size_t>(type_idx)].push_back(i);
        server_gpus.push_back(gpus);
        server_status.push_back(st);
        server_reclaimed_s.push_back(reclaimed_s);
        if (reclaimed_s > last_reclaim_s) last_reclaim_s = reclaimed_s;
        if (st == TRAINING) {
            training_servers.push_back(i);
            training_gpus += gpus;
        }
        free.push_back((st == TRAINING || st == LOANED) ? gpus : 0);
        jobs_on.emplace_back();
        ex_srv.push_back(0);
        if (st == LOANED) {
            ++n_loaned;
            on_loan.push_back(i);  // (i is past every server already listed)
            loaned_gpus += gpus;
            loaned_gpus_by_pool[static_cast<size_t>(pool_idx)] += gpus;
        }
        return i;
    }

    // Room for n jobs (every per-job vector); jobs are then set with set_job.
    void reserve_jobs(i64 n) {
        const auto u = static_cast<size_t>(n);
        arrival_s.resize(u, 0.0);
        gpus_per_worker.resize(u, 1);
        min_workers.resize(u, 1);
        max_workers.resize(u, 1);
        ref_workers.resize(u, 1);
        elastic.resize(u, 0);
        alpha.resize(u, 0.0);
        family.resize(u, -1);
        ref_throughput.resize(u, 1.0);
        status.resize(u, PENDING);
        workers.resize(u, 0);
        placement.resize(u);
        remaining_s.resize(u, 0.0);
        queued_since_s.resize(u, 0.0);
        waited_s.resize(u, 0.0);
        attained_gpu_s.resize(u, 0.0);
        records.resize(u);
        ex_job.resize(u);
        queued.resize(n);
        running.resize(n);
        below.resize(n);
        elastic_running.resize(n);
        gather.resize(u);
    }

    // state.py add_job / add_jobs (validated by the caller): a PENDING job.
    void set_job(i64 j, double arrival, i64 g, i64 ref, double remaining, i64 mn, i64 mx,
                 bool el, double a, i64 fam) {
        const auto u = static_cast<size_t>(j);
        arrival_s[u] = arrival;
        gpus_per_worker.set(u, g);
        min_workers.set(u, mn);
        max_workers.set(u, mx);
        ref_workers.set(u, ref);
        elastic[u] = el ? 1 : 0;
        alpha[u] = a;
        family.set(u, fam);
        ref_throughput[u] = ref_throughput_of(fam, a, ref, g);
        status[u] = PENDING;
        workers.set(u, 0);
        placement.clear(u);
        gather.release(u);
        remaining_s[u] = remaining;
        // progress_at_s 0, speed 0, checkpoint_remaining_s = remaining,
        // next_checkpoint_s inf, restarted 0, attained_at_s 0: no record
        if (const JobRecord* r = records.get(u)) {
            const i64 rs = r->run_seq;  // (kept, as before records)
            records.release(u);
            if (rs != -1) rec(j).run_seq = rs;
        }
        queued_since_s[u] = arrival;
        waited_s[u] = 0.0;
        attained_gpu_s[u] = 0.0;
    }
    // job j's record (created if it has none), to write its started-job values
    JobRecord& rec(i64 j) {
        const auto u = static_cast<size_t>(j);
        return records.mut(u, remaining_s[u]);
    }

    // ------------------------------------------------------------ job model
    // state.py _ref_throughput
    double ref_throughput_of(i64 fam, double a, i64 ref, i64 g) const {
        if (!has_speeds) return throughput_1(ref, a);
        return speeds.throughput(fam, a, speeds.ref_type, ref, g);
    }
    // state.py throughput_on
    double throughput_on(i64 j, i64 type, i64 w) const {
        const auto u = static_cast<size_t>(j);
        const double a = alpha[u];
        if (!has_speeds)
            return w > 0 ? static_cast<double>(w) / (1.0 + a * static_cast<double>(w - 1)) : 0.0;
        return speeds.throughput(family[u], a, type, w, gpus_per_worker[u]);
    }
    // state.py speed_at
    double speed_at(i64 j, i64 w, const Placement& place) const {
        const auto u = static_cast<size_t>(j);
        if (!has_speeds) {
            if (w == ref_workers[u]) return 1.0;
            const double a = alpha[u];
            return (static_cast<double>(w) / (1.0 + a * static_cast<double>(w - 1))) /
                   ref_throughput[u];
        }
        if (place.empty())
            throw InvalidInput("speed_at: a placement is needed on a typed cluster");
        // min over the placement's types (a set in Python; min is order-free)
        double best = 0.0;
        bool first = true;
        i64 seen_mask_small = 0;  // types < 64 seen; larger ones recomputed (harmless)
        for (const auto& e : place) {
            const i64 t = server_type[static_cast<size_t>(e.first)];
            if (t < 64) {
                if (seen_mask_small & (i64(1) << t)) continue;
                seen_mask_small |= i64(1) << t;
            }
            const double v = throughput_on(j, t, w);
            if (first || v < best) best = v;
            first = false;
        }
        return best / ref_throughput[u];
    }
    bool multi_type() const { return gpu_types.size() > 1; }

    // state.py type_order: types by the job's throughput on w workers there, fastest
    // first (ties: type index = order of the types' first servers).
    std::vector<i64> type_order(i64 j, i64 w, const std::vector<i64>& types) const {
        std::vector<std::pair<double, i64>> keyed;
        keyed.reserve(types.size());
        for (i64 t : types) keyed.emplace_back(-throughput_on(j, t, w), t);
        std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
            if (a.first < b.first) return true;
            if (b.first < a.first) return false;
            return a.second < b.second;
        });
        std::vector<i64> out;
        out.reserve(types.size());
        for (const auto& k : keyed) out.push_back(k.second);
        return out;
    }

    // state.py remaining_at
    double remaining_at(i64 j, double now) const {
        const auto u = static_cast<size_t>(j);
        double r = remaining_s[u];
        if (status[u] == RUNNING) {
            // progress_at_s[u] and speed[u] from one look-up of the record (0.0 without)
            const JobRecord* R = records.get(u);
            const double lt = R != nullptr ? R->progress_at_s : 0.0;
            if (now > lt) {
                r = r - (now - lt) * (R != nullptr ? R->speed : 0.0);
                r = r > 0.0 ? r : 0.0;
            }
        }
        return r;
    }
    // state.py remaining_work
    double remaining_work(i64 j, double now) const {
        return remaining_at(j, now) * ref_throughput[static_cast<size_t>(j)];
    }
    // state.py attained_at
    double attained_at(i64 j, double now) const {
        const auto u = static_cast<size_t>(j);
        double g = attained_gpu_s[u];
        if (status[u] == RUNNING)
            g += static_cast<double>(workers[u] * gpus_per_worker[u]) * (now - attained_at_s[u]);
        return g;
    }
    // state.py queue_age_s
    double queue_age_s(i64 j, double now) const {
        const auto u = static_cast<size_t>(j);
        return waited_s[u] + (now - queued_since_s[u]);
    }
    // state.py advance
    void advance(i64 j, double now) {
        const auto u = static_cast<size_t>(j);
        if (now > progress_at_s[u]) advance_record(rec(j), u, now);
    }
    // advance's update of job u's record R (its progress_at_s is before now)
    void advance_record(JobRecord& R, size_t u, double now) {
        const double lt = R.progress_at_s;
        const double sp = R.speed;
        double r = remaining_s[u];
        const double nc = R.next_checkpoint_s;
        if (now >= nc) {
            const double iv = config.checkpoint_interval_s;
            const double c = nc + std::floor((now - nc) / iv) * iv;
            R.checkpoint_remaining_s = py_max(0.0, r - (c - lt) * sp);
            R.next_checkpoint_s = c + iv;
        }
        r -= (now - lt) * sp;
        r = r > 0.0 ? r : 0.0;
        remaining_s[u] = r;
        R.progress_at_s = now;
        sync_gather(u, R);
    }
    // job u's GatherRow (if it has one) after a change of its progress values (R: its
    // record) or workers
    void sync_gather(size_t u, const JobRecord& R) {
        if (GatherRow* g = gather.mut(u)) fill_gather(*g, u, R);
    }
    // g's progress values and workers: job u's now (R: its record)
    void fill_gather(GatherRow& g, size_t u, const JobRecord& R) const {
        g.remaining_s = remaining_s[u];
        g.progress_at_s = R.progress_at_s;
        g.speed = R.speed;
        g.workers = static_cast<int32_t>(workers[u]);
    }
    // before gather_row on n jobs whose rows are all used together: none moves
    void gather_reserve(size_t n) const { gather.reserve_new(n); }
    // The GatherRow of job j of elastic_running, made from its values on first use;
    // nullptr for a job not running or without a record (read from its columns then)
    const GatherRow* gather_row(i64 j) const {
        const GatherRow* r = gather.get(static_cast<size_t>(j));
        return r != nullptr ? r : make_gather_row(static_cast<size_t>(j));
    }
    // (not inlined: once per job, it would weigh on the gather's loop)
#if defined(_MSC_VER)
    __declspec(noinline)
#else
    __attribute__((noinline))
#endif
    const GatherRow* make_gather_row(size_t u) const {
        const JobRecord* R = records.get(u);
        if (status[u] != RUNNING || R == nullptr) return nullptr;
        GatherRow& r = gather.add(u, min_workers[u], max_workers[u], gpus_per_worker[u],
                                  alpha[u], ref_throughput[u]);
        fill_gather(r, u, *R);
        return &r;
    }
    // job j's GatherRow throughputs for c = 0..n - 1 (it has a row; n <= max - base +
    // 1), computed as far as needed (not inlined: seldom, it would weigh on the loop)
#if defined(_MSC_VER)
    __declspec(noinline)
#else
    __attribute__((noinline))
#endif
    const double* gather_tput(i64 j, i64 n) const {
        return gather.grow_tput(static_cast<size_t>(j), n).tput();
    }
    // state.py close_attained
    void close_attained(i64 j, double now) {
        const auto u = static_cast<size_t>(j);
        attained_gpu_s[u] +=
            static_cast<double>(workers[u] * gpus_per_worker[u]) * (now - attained_at_s[u]);
        rec(j).attained_at_s = now;
    }

    // ------------------------------------------------------------ queue indexes
    // The key of job j in index `which` (fifo arrival_key, sjf wait_origin_key,
    // sjf_key_rigid, sjf_key_elastic, tiresias level).
    double queue_key(int which, i64 j) const {
        const auto u = static_cast<size_t>(j);
        switch (which) {
            case Q_ARRIVAL:
                return arrival_s[u];
            case Q_WAIT_ORIGIN:
                return queued_since_s[u] - waited_s[u];
            case Q_SJF_RIGID:
            case Q_SJF_ELASTIC: {
                const i64 w = (which == Q_SJF_ELASTIC && elastic[u]) ? min_workers[u]
                                                                      : ref_workers[u];
                const double a = alpha[u];
                return remaining_s[u] * ref_throughput[u] * (1.0 + a * static_cast<double>(w - 1)) /
                       static_cast<double>(w);
            }
            default: {  // bisect.bisect_right(thresholds, attained_gpu_s)
                const double x = attained_gpu_s[u];
                const auto it = std::upper_bound(las_thresholds.begin(), las_thresholds.end(), x);
                return static_cast<double>(it - las_thresholds.begin());
            }
        }
    }
    // state.py sorted_queue: built on first use, then kept by enqueue / start.
    // Q_LAS: `thresholds` (sorted ascending) select the index; other thresholds rebuild it.
    const QueueIndex& sorted_queue(int which,
                                   const std::vector<double>* thresholds = nullptr) const {
        if (which == Q_LAS && thresholds && (!qidx_built[Q_LAS] || *thresholds != las_thresholds)) {
            las_thresholds = *thresholds;
            qidx_built[Q_LAS] = false;
        }
        if (!qidx_built[which]) {
            std::vector<QueueEntry> buf;
            buf.reserve(static_cast<size_t>(queued.size()));
            for (i64 j : queued) buf.emplace_back(queue_key(which, j), j);
            std::sort(buf.begin(), buf.end());
            qidx[which].assign_sorted(buf);
            qidx_built[which] = true;
        }
        return qidx[which];
    }
    void drop_queue_indexes() {
        for (int k = 0; k < N_QUEUE_KEYS; ++k) {
            qidx[k].clear();
            qidx_built[k] = false;
        }
    }

    // ------------------------------------------------------------ mutators
    // state.py _place, for job j on no server's list (not running, or just unplaced):
    // `on.get(j, 0) + k` is k there (a placement names a server once).  Takes
    // place's buffer (PlacementTable::take); the const overload copies it first.
    i64 place_job(i64 j, const Placement& place) { return place_job(j, Placement(place)); }
    i64 place_job(i64 j, Placement&& place) {
        const auto u = static_cast<size_t>(j);
        const i64 g = gpus_per_worker[u];
        const i64 nt = n_training();
        i64 w = 0;
        for (const auto& e : place) {
            const i64 s = e.first, k = e.second;
            const auto su = static_cast<size_t>(s);
            free[su] -= k * g;
            jobs_on[su].emplace_back(j, k);
            w += k;
            busy_by_pool[static_cast<size_t>(server_pool_idx[su])] += k * g;
            if (s >= nt) busy_loaned += k * g;
        }
        busy += w * g;
        placement.take(u, std::move(place));
        workers.set(u, w);
        track_extras(j);
        return w;
    }
    // state.py _unplace
    void unplace_job(i64 j) {
        const auto u = static_cast<size_t>(j);
        const Placement& place = placement[u];
        if (place.empty()) return;
        const i64 g = gpus_per_worker[u];
        const i64 nt = n_training();
        for (const auto& e : place) {
            const i64 s = e.first, k = e.second;
            const auto su = static_cast<size_t>(s);
            free[su] += k * g;
            Placement& on = jobs_on[su];  // j's entry out: the last one takes its slot
            for (size_t q = 0; q < on.size(); ++q)
                if (on[q].first == j) {
                    on[q] = on.back();
                    on.pop_back();
                    break;
                }
            busy_by_pool[static_cast<size_t>(server_pool_idx[su])] -= k * g;
            if (s >= nt) busy_loaned -= k * g;
        }
        busy -= workers[u] * g;
        placement.clear(u);  // the slot goes back to the pool
        workers.set(u, 0);
        track_extras(j);
    }
    // _track_extras's first half: job u's extras now (ex_job[u], g GPUs a worker)
    // leave the per-server and total extra GPUs
    void extras_out(size_t u, i64 g) {
        const Placement& old = ex_job[u];
        if (old.empty()) return;
        i64 kg_all = 0;  // (summed here: ex_gpus is a member, stored at every step)
        for (const auto& e : old) {
            const i64 kg = e.second * g;
            ex_srv[static_cast<size_t>(e.first)] -= kg;
            kg_all += kg;
        }
        ex_gpus -= kg_all;
        --n_ex_job;
    }
    // its second half: job u's new extras `ex` (ex_job's entry of u, just written)
    // join them (an empty part leaves the job without an entry)
    void extras_in(size_t u, const Placement& ex, i64 g) {
        i64 kg_all = 0;
        for (const auto& e : ex) {
            const i64 kg = e.second * g;
            ex_srv[static_cast<size_t>(e.first)] += kg;
            kg_all += kg;
        }
        ex_gpus += kg_all;
        if (!ex.empty()) ++n_ex_job;
        else ex_job.clear(u);
    }
    // state.py _track_extras
    void track_extras(i64 j) {
        const auto u = static_cast<size_t>(j);
        const i64 g = gpus_per_worker[u];
        extras_out(u, g);
        const Placement& place = placement[u];
        if (place.empty() || !elastic[u]) {
            ex_job.clear(u);
            below.remove(j);
            return;
        }
        const i64 w = workers[u], mn = min_workers[u];
        if (w > mn) {
            Placement& ex = ex_job.mut(u);  // (split_placement clears it first)
            split_placement(place, mn, nullptr, &ex);
            extras_in(u, ex, g);
        } else {
            ex_job.clear(u);
        }
        if (w < max_workers[u] && max_workers[u] > mn) below.add(j);
        else below.remove(j);
    }
    // state.py enqueue
    void enqueue(i64 j, double now) {
        const auto u = static_cast<size_t>(j);
        status[u] = QUEUED;
        queued.add(j);
        queued_since_s[u] = now;
        for (int k = 0; k < N_QUEUE_KEYS; ++k)
            if (qidx_built[k]) qidx[k].insert(QueueEntry(queue_key(k, j), j));
    }
    // state.py _dequeue
    void dequeue(i64 j) {
        queued.remove(j);
        for (int k = 0; k < N_QUEUE_KEYS; ++k)
            if (qidx_built[k]) qidx[k].erase(QueueEntry(queue_key(k, j), j));
    }
    // state.py start (takes place's buffer, see place_job)
    i64 start(i64 j, Placement&& place, double now) {
        const auto u = static_cast<size_t>(j);
        dequeue(j);
        const i64 w = place_job(j, std::move(place));
        status[u] = RUNNING;
        running.add(j);
        JobRecord& R = rec(j);
        R.run_seq = next_run_seq++;
        if (elastic[u] && max_workers[u] > min_workers[u]) elastic_running.add(j);
        base_busy += min_workers[u] * gpus_per_worker[u];
        waited_s[u] += now - queued_since_s[u];
        R.attained_at_s = now;
        R.speed = speed_at(j, w, placement[u]);
        const double lt = now + (R.restarted ? config.restart_cost_s : 0.0);
        R.progress_at_s = lt;
        R.checkpoint_remaining_s = remaining_s[u];
        R.next_checkpoint_s = lt + config.checkpoint_interval_s;
        return w;
    }
    // state.py unplace_for_resize
    i64 unplace_for_resize(i64 j, double now) {
        advance(j, now);
        close_attained(j, now);
        const i64 w = workers[static_cast<size_t>(j)];
        unplace_job(j);
        sync_gather(static_cast<size_t>(j), rec(j));
        return w;
    }
    // the end of state.py place_resized (and of a resize in one step): progress resumes
    // after the rescale pause, from a checkpoint of the remaining work; the job's
    // GatherRow follows
    void rescale_pause(size_t u, JobRecord& R, double now) {
        const double lt = py_max(R.progress_at_s, now + config.rescale_pause_s);
        R.progress_at_s = lt;
        R.checkpoint_remaining_s = remaining_s[u];
        R.next_checkpoint_s = lt + config.checkpoint_interval_s;
        sync_gather(u, R);
    }
    // state.py place_resized
    i64 place_resized(i64 j, const Placement& place, double now) {
        const auto u = static_cast<size_t>(j);
        const i64 w = place_job(j, place);
        const double sp = speed_at(j, w, placement[u]);
        JobRecord& R = rec(j);
        R.speed = sp;
        rescale_pause(u, R, now);
        return w;
    }
    // unplace_for_resize(j) then place_resized(j, place) in one step, for running job
    // j: the same state, with the job's placement slot rewritten in place.  GPU counts
    // go back per old entry and are taken per new one (sums: any order).  A server's
    // job list (no order, see jobs_on) holds the same entries as _unplace then _place
    // leave it: the job's entry with its new workers where it stays or arrives (left
    // as it is where they do not change), gone where it leaves (it is on a server's
    // list exactly where its placement has the server; a placement names a server
    // once, as a Python dict).  The two
    // calls of _track_extras (_unplace's, then _place's) in one: the old extras out,
    // the new ones in, and j out of `below`, appended again when it is still below
    // its maximum (last, as the two calls leave it).  Returns the old worker count.
    // Takes place's buffer (it is left with the job's old placement buffer); the
    // const overload copies place into a kept buffer first.
    i64 resize(i64 j, const Placement& place, double now) {
        resize_copy = place;
        return resize(j, std::move(resize_copy), now);
    }
    i64 resize(i64 j, Placement&& place, double now) {
        const auto u = static_cast<size_t>(j);
        JobRecord& R = rec(j);  // (a running job has one: looked up once for all below)
        if (now > R.progress_at_s) advance_record(R, u, now);
        const i64 w_old = workers[u];
        const i64 g = gpus_per_worker[u];
        // close_attained
        attained_gpu_s[u] += static_cast<double>(w_old * g) * (now - R.attained_at_s);
        R.attained_at_s = now;
        const i64 nt = n_training();
        Placement& cur = placement.mut(u);
        // mark: 0 = not in the new placement, 1 + workers there = in it, -1 = listed
        std::vector<i64>& mark = resize_mark;
        if (mark.size() < free.size()) mark.resize(free.size(), 0);
        // GPUs: each server's change only (taken back, then taken: integer sums, the
        // same in any order), none where the job keeps its workers
        i64 loaned_kg = 0;  // (busy_loaned's change)
        auto gpus = [&](i64 s, i64 kg) {  // kg GPUs taken on server s (< 0: given back)
            const auto su = static_cast<size_t>(s);
            free[su] -= kg;
            busy_by_pool[static_cast<size_t>(server_pool_idx[su])] += kg;
            loaned_kg += kg * static_cast<i64>(s >= nt);
        };
        i64 w = 0;
        for (const auto& e : place) {
            w += e.second;
            i64& m = mark[static_cast<size_t>(e.first)];
            m = (m ? m : 1) + e.second;
        }
        busy += (w - w_old) * g;
        for (const auto& e : cur) {
            i64& m = mark[static_cast<size_t>(e.first)];
            if (m == e.second + 1) {  // j stays with its workers: its entry as it is
                m = -1;
                continue;
            }
            Placement& on = jobs_on[static_cast<size_t>(e.first)];
            size_t q = on.size();  // j's entry (j is on the list: the server is in cur)
            while (on[--q].first != j) {
            }
            if (m == 0) {  // j leaves the server: the last entry takes its slot
                gpus(e.first, -e.second * g);
                on[q] = on.back();
                on.pop_back();
            } else {  // j stays with other workers
                gpus(e.first, (m - 1 - e.second) * g);
                on[q].second = m - 1;
                m = -1;
            }
        }
        for (const auto& e : place) {  // new servers; every mark back to 0
            i64& m = mark[static_cast<size_t>(e.first)];
            if (m > 0) {
                gpus(e.first, (m - 1) * g);
                jobs_on[static_cast<size_t>(e.first)].emplace_back(j, m - 1);
            }
            m = 0;
        }
        busy_loaned += loaned_kg;
        // _unplace's _track_extras: the old extras out
        extras_out(u, g);
        const bool placed = !place.empty();
        if (placed) std::swap(cur, place);  // (from here on the new placement is cur)
        else placement.clear(u);
        workers.set(u, w);
        // _place's _track_extras: the new extras in, `below`
        if (!placed || !elastic[u]) {
            ex_job.clear(u);
            below.remove(j);
        } else {
            const i64 mn = min_workers[u], mx = max_workers[u];
            if (w > mn) {
                Placement& ex = ex_job.mut(u);
                extra_part(cur, mn, ex);
                extras_in(u, ex, g);
            } else {
                ex_job.clear(u);
            }
            if (w < mx && mx > mn) below.move_to_back(j);
            else below.remove(j);
        }
        R.speed = speed_at(j, w, placement[u]);
        rescale_pause(u, R, now);
        return w_old;
    }
    // state.py preempt
    void preempt(i64 j, double now) {
        const auto u = static_cast<size_t>(j);
        advance(j, now);
        close_attained(j, now);
        unplace_job(j);
        running.remove(j);
        elastic_running.remove(j);
        gather.release(u);
        base_busy -= min_workers[u] * gpus_per_worker[u];
        JobRecord& R = rec(j);
        remaining_s[u] = R.checkpoint_remaining_s;
        R.progress_at_s = now;
        R.next_checkpoint_s = kInf;
        R.restarted = 1;
        R.speed = 0.0;
        enqueue(j, now);
    }
    // state.py finish
    void finish(i64 j, double now) {
        const auto u = static_cast<size_t>(j);
        advance(j, now);
        remaining_s[u] = 0.0;
        close_attained(j, now);
        unplace_job(j);
        running.remove(j);
        elastic_running.remove(j);
        gather.release(u);
        base_busy -= min_workers[u] * gpus_per_worker[u];
        status[u] = DONE;
    }
    // state.py lend
    void lend(i64 s) {
        const auto su = static_cast<size_t>(s);
        if (server_status[su] != IDLE)
            throw InvalidInput("servers[" + std::to_string(s) +
                               "]: only an idle inference server can be lent");
        server_status[su] = LOANED;
        const i64 gpus = server_gpus[su];
        free[su] = gpus;
        ++n_loaned;
        on_loan.insert(std::lower_bound(on_loan.begin(), on_loan.end(), s), s);
        loaned_gpus += gpus;
        loaned_gpus_by_pool[static_cast<size_t>(server_pool_idx[su])] += gpus;
    }
    // state.py give_back
    void give_back(i64 s, bool reclaimed, double now) {
        const auto su = static_cast<size_t>(s);
        if (server_status[su] != LOANED || !jobs_on[su].empty())
            throw InvalidInput("servers[" + std::to_string(s) +
                               "]: only an empty loaned server can be returned");
        server_status[su] = IDLE;
        free[su] = 0;
        --n_loaned;
        on_loan.erase(std::lower_bound(on_loan.begin(), on_loan.end(), s));
        const i64 gpus = server_gpus[su];
        loaned_gpus -= gpus;
        loaned_gpus_by_pool[static_cast<size_t>(server_pool_idx[su])] -= gpus;
        if (reclaimed) {
            server_reclaimed_s[su] = now;
            if (now > last_reclaim_s) last_reclaim_s = now;
        }
        // a server back on the inference side serves the earliest request
        if (!reclaim_requests.empty()) {
            if (reclaim_requests.front().second > 1) --reclaim_requests.front().second;
            else reclaim_requests.erase(reclaim_requests.begin());
        }
    }
    // state.py set_demand
    void set_demand(i64 needed, double deadline_s) {
        servers_needed = needed;
        auto& req = reclaim_requests;
        const i64 deficit = reclaim_deficit();
        i64 asked = 0;
        for (const auto& r : req) asked += r.second;
        if (deficit > asked) {
            size_t k = req.size();
            while (k > 0 && req[k - 1].first > deadline_s) --k;
            req.insert(req.begin() + static_cast<std::ptrdiff_t>(k), {deadline_s, deficit - asked});
        } else {
            while (asked > deficit) {
                auto& last = req.back();
                const i64 cut = py_min(last.second, asked - deficit);
                asked -= cut;
                if (last.second > cut) last.second -= cut;
                else req.pop_back();
            }
        }
        set_serving();
    }
    // state.py reclaim_due
    i64 reclaim_due(double t) const {
        const i64 deficit = reclaim_deficit();
        i64 due = 0;
        if (reclaim_deadline_s <= t) {
            due = deficit;
        } else {
            for (const auto& r : reclaim_requests) {
                if (r.first > t) break;
                due += r.second;
            }
        }
        return py_min(py_min(due, deficit), n_loaned);
    }
    // state.py reclaim_asked
    i64 reclaim_asked() const {
        const i64 deficit = reclaim_deficit();
        if (reclaim_deadline_s < kInf) return deficit;
        i64 asked = 0;
        for (const auto& r : reclaim_requests) asked += r.second;
        return py_min(deficit, asked);
    }
    // state.py next_reclaim_deadline_s
    double next_reclaim_deadline_s() const {
        if (reclaim_deficit() == 0) return kInf;
        double t = reclaim_deadline_s > now_s ? reclaim_deadline_s : kInf;
        for (const auto& r : reclaim_requests)
            if (r.first > now_s) return t < r.first ? t : r.first;
        return t;
    }
    // state.py set_serving
    void set_serving() {
        i64 left = servers_needed;
        for (i64 s = n_training(); s < n_servers(); ++s) {
            int8_t& st = server_status[static_cast<size_t>(s)];
            if (st == LOANED) continue;
            if (left > 0) {
                st = SERVING;
                --left;
            } else {
                st = IDLE;
            }
        }
    }

    // ------------------------------------------------------------ views
    // state.py loaned_servers
    const std::vector<i64>& loaned_servers() const { return on_loan; }
    i64 not_loaned() const { return n_servers() - n_training() - n_loaned; }
    i64 reclaim_deficit() const { return py_max(i64(0), servers_needed - not_loaned()); }

    // ------------------------------------------------------------ indexes
    // state.py rebuild_indexes: free, jobs_on, extras, busy counters and loans from
    // the placements of the running jobs (running order), independently of the
    // incremental code.  Placements must already be set (placement, workers).
    void rebuild_indexes() {
        const i64 n = n_servers();
        const i64 nt = n_training();
        for (i64 s = 0; s < n; ++s) {
            const auto su = static_cast<size_t>(s);
            const int8_t st = server_status[su];
            free[su] = (st == TRAINING || st == LOANED) ? server_gpus[su] : 0;
            jobs_on[su].clear();
            ex_srv[su] = 0;
        }
        ex_job.clear_all();
        n_ex_job = 0;
        ex_gpus = 0;
        below.clear();
        elastic_running.clear();
        gather.clear();
        busy = base_busy = busy_loaned = 0;
        std::fill(busy_by_pool.begin(), busy_by_pool.end(), 0);
        for (i64 j : running) {
            const auto u = static_cast<size_t>(j);
            const Placement& place = placement[u];
            if (place.empty())
                throw InvalidInput("jobs[" + std::to_string(j) + "]: running with no placement");
            const i64 g = gpus_per_worker[u];
            i64 w = 0;
            for (const auto& e : place) {
                const auto su = static_cast<size_t>(e.first);
                free[su] -= e.second * g;
                jobs_on[su].emplace_back(j, e.second);
                w += e.second;
                busy_by_pool[static_cast<size_t>(server_pool_idx[su])] += e.second * g;
                if (e.first >= nt) busy_loaned += e.second * g;
            }
            if (w != workers[u])
                throw InvalidInput("jobs[" + std::to_string(j) + "]: workers " +
                                   std::to_string(workers[u]) + " != placement " +
                                   std::to_string(w));
            busy += w * g;
            const i64 mn = min_workers[u];
            base_busy += mn * g;
            if (elastic[u] && max_workers[u] > mn) {
                elastic_running.add(j);
                if (w < max_workers[u]) below.add(j);
            }
            if (elastic[u] && w > mn) {
                split_placement(place, mn, nullptr, &ex_job.mut(u));
                i64 kg_all = 0;  // (summed here: ex_gpus is a member, stored at every step)
                for (const auto& e : ex_job[u]) {
                    const i64 kg = e.second * g;
                    ex_srv[static_cast<size_t>(e.first)] += kg;
                    kg_all += kg;
                }
                ex_gpus += kg_all;
                ++n_ex_job;
            }
        }
        n_loaned = loaned_gpus = 0;
        on_loan.clear();
        std::fill(loaned_gpus_by_pool.begin(), loaned_gpus_by_pool.end(), 0);
        last_reclaim_s = -kInf;
        for (i64 s = 0; s < n; ++s) {
            const auto su = static_cast<size_t>(s);
            if (server_status[su] == LOANED) {
                ++n_loaned;
                on_loan.push_back(s);
                loaned_gpus_by_pool[static_cast<size_t>(server_pool_idx[su])] += server_gpus[su];
            }
            if (server_reclaimed_s[su] > last_reclaim_s) last_reclaim_s = server_reclaimed_s[su];
        }
        for (i64 x : loaned_gpus_by_pool) loaned_gpus += x;
    }

    // state.py check_indexes: "" if every derived index equals an independent
    // recomputation, else the name of the first that drifted.  O(servers + placements).
    std::string check_indexes() const {
        State r;  // recomputation on a copy of the primary fields only
        r.server_gpus = server_gpus;
        r.server_status = server_status;
        r.server_reclaimed_s = server_reclaimed_s;
        r.server_pool_idx = server_pool_idx;
        r.training_servers = training_servers;
        r.n_pools = n_pools;
        r.busy_by_pool.assign(static_cast<size_t>(n_pools), 0);
        r.loaned_gpus_by_pool.assign(static_cast<size_t>(n_pools), 0);
        r.free.assign(server_gpus.size(), 0);
        r.jobs_on.assign(server_gpus.size(), Placement());
        r.ex_srv.assign(server_gpus.size(), 0);
        r.gpus_per_worker = gpus_per_worker;
        r.min_workers = min_workers;
        r.max_workers = max_workers;
        r.elastic = elastic;
        r.workers = workers;
        r.placement = placement;
        r.ex_job.assign(static_cast<size_t>(n_jobs()), Placement());
        r.below.resize(n_jobs());
        r.elastic_running.resize(n_jobs());
        r.running.resize(n_jobs());
        for (i64 j : running) r.running.add(j);
        try {
            r.rebuild_indexes();
        } catch (const InvalidInput& e) {
            return e.what();
        }
        if (r.free != free) return "free GPUs per server drifted";
        for (size_t s = 0; s < jobs_on.size(); ++s)
            if (!place_equal(r.jobs_on[s], jobs_on[s])) return "jobs per server drifted";
        if (r.ex_srv != ex_srv) return "extra GPUs per server drifted";
        if (r.ex_gpus != ex_gpus) return "extra GPUs in all drifted";
        if (r.n_ex_job != n_ex_job) return "extra workers per job drifted";
        for (size_t j = 0; j < ex_job.size(); ++j)
            if (!place_equal(r.ex_job[j], ex_job[j])) return "extra workers per job drifted";
        if (r.below.size() != below.size()) return "jobs below their maximum drifted";
        for (i64 j : below)
            if (!r.below.contains(j)) return "jobs below their maximum drifted";
        if (r.elastic_running.to_vector() != elastic_running.to_vector())
            return "running elastic jobs (start order) drifted";
        // the elastic phase's rows (GatherRows): of elastic running jobs only, each
        // holding the job's values now and its throughputs on base + c workers
        auto same = [](double a, double b) { return a == b || (a != a && b != b); };
        size_t n_rows = 0;
        for (i64 j : elastic_running) {
            const auto u = static_cast<size_t>(j);
            const GatherRow* g = gather.get(u);
            if (g == nullptr) continue;
            ++n_rows;
            const JobRecord* R = records.get(u);
            if (R == nullptr || status[u] != RUNNING || !same(g->remaining_s, remaining_s[u]) ||
                !same(g->progress_at_s, R->progress_at_s) || !same(g->speed, R->speed) ||
                !same(g->ref_throughput, ref_throughput[u]) || g->base != min_workers[u] ||
                g->max_workers != max_workers[u] || g->gpus != gpus_per_worker[u] ||
                g->workers != workers[u])
                return "gather rows drifted";
            if (!same(g->alpha, alpha[u]) || g->n_tput < 0 ||
                g->n_tput > g->max_workers - g->base + 1 || !gather.owns_tput(u))
                return "gather rows drifted";
            for (i64 c = 0; c < g->n_tput; ++c)
                if (!same(g->tput()[c], elastic_throughput(g->base + c, alpha[u])))
                    return "gather rows drifted";
        }
        if (n_rows != gather.n_rows()) return "gather rows drifted";
        if (r.busy != busy) return "busy GPUs drifted";
        if (r.base_busy != base_busy) return "base-worker GPUs drifted";
        if (r.n_loaned != n_loaned || r.on_loan != on_loan) return "loaned servers drifted";
        if (r.busy_loaned != busy_loaned) return "GPUs busy on loaned servers drifted";
        if (r.busy_by_pool != busy_by_pool) return "busy GPUs per pool drifted";
        if (r.loaned_gpus_by_pool != loaned_gpus_by_pool) return "loaned GPUs per pool drifted";
        if (r.loaned_gpus != loaned_gpus) return "loaned GPUs drifted";
        if (!(r.last_reclaim_s == last_reclaim_s)) return "last reclaim time drifted";
        for (int k = 0; k < N_QUEUE_KEYS; ++k) {
            if (!qidx_built[k]) continue;
            std::vector<QueueEntry> buf;
            for (i64 j : queued) buf.emplace_back(queue_key(k, j), j);
            std::sort(buf.begin(), buf.end());
            QueueIndex ref;
            ref.assign_sorted(buf);
            if (ref != qidx[k]) {
                static const char* names[] = {"arrival", "wait-origin", "sjf-rigid",
                                              "sjf-elastic", "las"};
                return std::string("queue index '") + names[k] + "' drifted";
            }
        }
        return "";
    }
};

}  // namespace sched
}  // namespace aryl
