// reclaim.hpp — Aryl's reclaim greedy: which loaned servers to return to the
// inference cluster so that as few training jobs as possible are preempted.
//
// Plain C++17, no Python dependency (the pybind11 binding is _reclaim.cpp; the
// pure-Python twin is aryl/_reference/reclaim.py, with the same tie rules).
//
// Model [Aryl §3 "Reclaim"]
// -------------------------
// A job j has W_j workers in total (everywhere, loaned or not) and a base b_j.
// An elastic job can still shed  shed_j = W_j - b_j  workers (a rigid job: 0),
// one budget shared by all the servers returned.  Taking server s, for every job
// j still on s with w_js workers there:
//   * w_js <= shed_j : scale in (W_j -= w_js, shed_j -= w_js)          — cost 0
//   * otherwise      : preempt j (it loses all its workers everywhere) — cost w_js / W_j
// The cost of s is the sum of the second kind of terms, summed in placement
// input order as IEEE doubles; servers are compared on the cost rounded to the
// nearest 1e-9 (round half to even), then fewer jobs touched, then fewer busy
// GPUs, then lower server id — a strict total order, identical in both twins.
// A server is ineligible when it is not of the requested GPU type or when a
// non-preemptible job on it cannot shed all its workers there; budgets only
// shrink and non-preemptible jobs never leave, so an ineligible server stays
// ineligible and is dropped from the heap (skipped, never ends the search).
//
// Complexity: O(m + p + J) to build, then per step O(log m) heap work plus,
// for each job touched, a recompute of the servers that share it (each
// O(placements on that server), bounded by the server's GPUs).  Memory: O(m + p + J)
// scratch, kept per thread between calls (thread_local Workspace).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace aryl {
namespace reclaim {

// Action kinds and reason codes (same integers as aryl.reclaiming.ActionKind / ReclaimReason).
constexpr int64_t KIND_RETURN = 0;
constexpr int64_t KIND_SCALE_IN = 1;
constexpr int64_t KIND_PREEMPT = 2;

constexpr int64_t REASON_IDLE_SERVER = 0;   // RETURN of a server with no training work on it
constexpr int64_t REASON_SELECTED = 1;      // RETURN of a busy server chosen by the policy
constexpr int64_t REASON_ELASTIC_SHED = 2;  // SCALE_IN: the job stays at or above its base
constexpr int64_t REASON_RIGID_JOB = 3;     // PREEMPT: the job is not elastic
constexpr int64_t REASON_BELOW_BASE = 4;    // PREEMPT: shedding would take it below its base

// Costs are compared after rounding to the nearest multiple of 1 / kCostScale.
constexpr double kCostScale = 1e9;

inline int64_t quantize_cost(double cost) {
    // llrint rounds half to even in the default rounding mode, like Python's round();
    // the product is rounded to double first (no fused multiply-add is possible here).
    const double scaled = cost * kCostScale;
    return static_cast<int64_t>(std::llrint(scaled));
}

struct Input {
    int64_t n_servers = 0;                     // m loaned servers
    const int64_t* server_id = nullptr;        // (m,) unique ids (tie rule only)
    const int64_t* server_gpus = nullptr;      // (m,) unused by the greedy, kept for the twin's signature
    const int64_t* server_allowed = nullptr;   // (m,) 1 = of the requested GPU type
    int64_t n_placements = 0;                  // p
    const int64_t* placement_job = nullptr;    // (p,) job index in [0, J)
    const int64_t* placement_server = nullptr; // (p,) server index in [0, m)
    const int64_t* placement_workers = nullptr;// (p,) >= 1
    int64_t n_jobs = 0;                        // J
    const int64_t* job_workers = nullptr;      // (J,) total workers everywhere
    const int64_t* job_gpus_per_worker = nullptr;  // (J,)
    const int64_t* job_min_workers = nullptr;  // (J,) base
    const int64_t* job_elastic = nullptr;      // (J,) 0/1
    const int64_t* job_preemptible = nullptr;  // (J,) 0/1
    int64_t n_return = 0;                      // servers asked back
};

struct Output {
    std::vector<int64_t> taken;        // server indices in the order taken
    std::vector<double> cost;          // cost of each when taken
    std::vector<int64_t> act_server;   // actions: server index
    std::vector<int64_t> act_job;      //          job index, -1 for RETURN
    std::vector<int64_t> act_kind;     //          KIND_*
    std::vector<int64_t> act_workers;  //          workers removed (PREEMPT: the job's whole total)
    std::vector<int64_t> act_reason;   //          REASON_*
    std::vector<int64_t> preempted;    // job indices, in order of preemption
    std::vector<int64_t> scaled;       // job indices scaled in and not preempted, first scale-in order
    std::vector<int64_t> scaled_new_workers;  // their final totals
    int64_t shortfall = 0;
    // Empty again, its vectors keeping their buffers (for a caller that reuses it).
    void clear() {
        for (auto* v : {&taken, &act_server, &act_job, &act_kind, &act_workers, &act_reason,
                        &preempted, &scaled, &scaled_new_workers})
            v->clear();
        cost.clear();
        shortfall = 0;
    }
};

struct Key {
    int64_t cost_q;
    int64_t touched;
    int64_t busy;
    int64_t id;
    bool operator<(const Key& o) const {
        if (cost_q != o.cost_q) return cost_q < o.cost_q;
        if (touched != o.touched) return touched < o.touched;
        if (busy != o.busy) return busy < o.busy;
        return id < o.id;
    }
};

// Binary min-heap over item indices with a position table: update / remove in
// O(log m).  Keys are stored in the heap entries, so sifting reads contiguous memory.
class IndexedHeap {
public:
    explicit IndexedHeap(int64_t m) { reset(m); }
    // Reuse the storage for m items (capacity is kept between calls).
    void reset(int64_t m) {
        heap_.clear();
        heap_.reserve(static_cast<size_t>(m));
        pos_.assign(static_cast<size_t>(m), -1);
    }
    bool empty() const { return heap_.empty(); }
    bool contains(int64_t i) const { return pos_[i] >= 0; }
    // Append without ordering; call heapify() once after the last append.
    void append(int64_t i, const Key& k) {
        pos_[i] = static_cast<int64_t>(heap_.size());
        heap_.push_back(Entry{k, i});
    }
    void heapify() {
        for (int64_t h = static_cast<int64_t>(heap_.size()) / 2 - 1; h >= 0; --h) down(h);
    }
    int64_t pop() {
        const int64_t top = heap_[0].item;
        remove(top);
        return top;
    }
    void update(int64_t i, const Key& k) {
        const int64_t h = pos_[i];
        const bool smaller = k < heap_[h].key;
        heap_[h].key = k;
        if (smaller) up(h); else down(h);
    }
    void remove(int64_t i) {
        const int64_t h = pos_[i];
        const Entry last = heap_.back();
        heap_.pop_back();
        pos_[i] = -1;
        if (last.item == i) return;
        heap_[h] = last;
        pos_[last.item] = h;
        up(h);
        down(pos_[last.item]);
    }

private:
    struct Entry {
        Key key;
        int64_t item;
    };
    void up(int64_t h) {
        const Entry e = heap_[h];
        while (h > 0) {
            const int64_t parent = (h - 1) / 2;
            if (!(e.key < heap_[parent].key)) break;
            heap_[h] = heap_[parent];
            pos_[heap_[h].item] = h;
            h = parent;
        }
        heap_[h] = e;
        pos_[e.item] = h;
    }
    void down(int64_t h) {
        const int64_t n = static_cast<int64_t>(heap_.size());
        const Entry e = heap_[h];
        for (;;) {
            int64_t c = 2 * h + 1;
            if (c >= n) break;
            if (c + 1 < n && heap_[c + 1].key < heap_[c].key) ++c;
            if (!(heap_[c].key < e.key)) break;
            heap_[h] = heap_[c];
            pos_[heap_[h].item] = h;
            h = c;
        }
        heap_[h] = e;
        pos_[e.item] = h;
    }
    std::vector<Entry> heap_;
    std::vector<int64_t> pos_;
};

// Scratch memory of one greedy run.  greedy() keeps one per thread so that
// repeated calls (a simulator reclaims many times) reuse it instead of paying
// for fresh pages each time.
struct Workspace {
    std::vector<int64_t> srv_start, job_start;           // CSR offsets
    std::vector<int64_t> pl_job, pl_workers, pl_server;  // placements, server order
    std::vector<int64_t> job_pl;                         // per job: positions a
    std::vector<int64_t> fill;
    std::vector<char> alive;                             // per position a
    struct JobState {
        int64_t workers;          // current total, everywhere
        int64_t shed;             // workers it can still lose and stay >= base
        int64_t gpus_per_worker;
        int32_t status;           // 0 untouched, 1 scaled in, 2 preempted
        bool preemptible;
        bool elastic;
    };
    std::vector<JobState> job;
    std::vector<double> cost;
    std::vector<int64_t> touched, stamp, affected;
    IndexedHeap heap{0};
};

class Greedy {
public:
    using JobState = Workspace::JobState;

    Greedy(const Input& in, Workspace& ws) : in_(in), ws_(ws) {
        const int64_t m = in.n_servers, p = in.n_placements, J = in.n_jobs;
        // Placements reordered by server (stable: input order within a server), so a
        // server's placements are contiguous; a = position in that order.
        ws.srv_start.assign(static_cast<size_t>(m + 1), 0);
        ws.job_start.assign(static_cast<size_t>(J + 1), 0);
        ws.pl_job.resize(static_cast<size_t>(p));
        ws.pl_workers.resize(static_cast<size_t>(p));
        ws.pl_server.resize(static_cast<size_t>(p));
        ws.job_pl.resize(static_cast<size_t>(p));
        ws.alive.assign(static_cast<size_t>(p), 1);
        ws.job.resize(static_cast<size_t>(J));
        ws.cost.assign(static_cast<size_t>(m), 0.0);
        ws.touched.assign(static_cast<size_t>(m), 0);
        ws.stamp.assign(static_cast<size_t>(m), 0);
        srv_start_ = ws.srv_start.data();
        job_start_ = ws.job_start.data();
        pl_job_ = ws.pl_job.data();
        pl_workers_ = ws.pl_workers.data();
        pl_server_ = ws.pl_server.data();
        job_pl_ = ws.job_pl.data();
        alive_ = ws.alive.data();
        job_ = ws.job.data();
        cost_ = ws.cost.data();
        touched_ = ws.touched.data();
        stamp_ = ws.stamp.data();

        for (int64_t q = 0; q < p; ++q) {
            ++srv_start_[in.placement_server[q] + 1];
            ++job_start_[in.placement_job[q] + 1];
        }
        for (int64_t s = 0; s < m; ++s) srv_start_[s + 1] += srv_start_[s];
        for (int64_t j = 0; j < J; ++j) job_start_[j + 1] += job_start_[j];
        std::vector<int64_t>& fill = ws.fill;
        fill.assign(ws.srv_start.begin(), ws.srv_start.end() - 1);
        for (int64_t q = 0; q < p; ++q) {
            const int64_t s = in.placement_server[q];
            const int64_t a = fill[s]++;
            pl_job_[a] = in.placement_job[q];
            pl_workers_[a] = in.placement_workers[q];
            pl_server_[a] = s;
        }
        fill.assign(ws.job_start.begin(), ws.job_start.end() - 1);
        for (int64_t a = 0; a < p; ++a) job_pl_[fill[pl_job_[a]]++] = a;
        for (int64_t j = 0; j < J; ++j) {
            JobState& js = job_[j];
            js.workers = in.job_workers[j];
            js.shed = in.job_elastic[j] ? js.workers - in.job_min_workers[j] : 0;
            js.gpus_per_worker = in.job_gpus_per_worker[j];
            js.preemptible = in.job_preemptible[j] != 0;
            js.elastic = in.job_elastic[j] != 0;
            js.status = 0;
        }
    }

    // Current key of server s; false if ineligible.
    bool stats(int64_t s, Key& key) {
        double c = 0.0;
        int64_t touched = 0, busy = 0;
        for (int64_t a = srv_start_[s]; a < srv_start_[s + 1]; ++a) {
            if (!alive_[a]) continue;
            const JobState& js = job_[pl_job_[a]];
            const int64_t w = pl_workers_[a];
            ++touched;
            busy += w * js.gpus_per_worker;
            if (w <= js.shed) continue;
            if (!js.preemptible) return false;
            c += static_cast<double>(w) / static_cast<double>(js.workers);
        }
        cost_[s] = c;
        touched_[s] = touched;
        key = Key{quantize_cost(c), touched, busy, in_.server_id[s]};
        return true;
    }

    // The greedy into out (its vectors cleared first: their buffers are reused).
    void run(Output& out) {
        out.clear();
        const int64_t m = in_.n_servers;
        IndexedHeap& heap = ws_.heap;
        heap.reset(m);
        std::vector<int64_t>& affected = ws_.affected;
        Key key{};
        for (int64_t s = 0; s < m; ++s)
            if (in_.server_allowed[s] && stats(s, key)) heap.append(s, key);
        heap.heapify();

        int64_t n_taken = 0;
        int64_t stamp = 0;
        while (n_taken < in_.n_return && !heap.empty()) {
            const int64_t s = heap.pop();
            ++n_taken;
            out.taken.push_back(s);
            out.cost.push_back(cost_[s]);
            push_action(out, s, -1, KIND_RETURN, 0,
                        touched_[s] == 0 ? REASON_IDLE_SERVER : REASON_SELECTED);
            ++stamp;
            stamp_[s] = stamp;  // never re-queue s itself
            affected.clear();
            for (int64_t a = srv_start_[s]; a < srv_start_[s + 1]; ++a) {
                if (!alive_[a]) continue;
                alive_[a] = 0;
                const int64_t j = pl_job_[a];
                const int64_t w = pl_workers_[a];
                JobState& js = job_[j];
                if (w <= js.shed) {
                    js.workers -= w;
                    js.shed -= w;
                    push_action(out, s, j, KIND_SCALE_IN, w, REASON_ELASTIC_SHED);
                    if (js.status == 0) {
                        js.status = 1;
                        out.scaled.push_back(j);
                    }
                } else {
                    push_action(out, s, j, KIND_PREEMPT, js.workers,
                                js.elastic ? REASON_BELOW_BASE : REASON_RIGID_JOB);
                    js.status = 2;
                    out.preempted.push_back(j);
                    js.workers = 0;
                    js.shed = 0;
                }
                // Every other server of j changes (fewer workers, smaller budget, or job gone).
                const bool gone = js.status == 2;
                for (int64_t b = job_start_[j]; b < job_start_[j + 1]; ++b) {
                    const int64_t r = job_pl_[b];
                    if (!alive_[r]) continue;
                    if (gone) alive_[r] = 0;
                    const int64_t t = pl_server_[r];
                    if (stamp_[t] != stamp) {
                        stamp_[t] = stamp;
                        affected.push_back(t);
                    }
                }
            }
            for (int64_t t : affected) {
                if (!heap.contains(t)) continue;  // taken, wrong type, or already ineligible
                if (stats(t, key)) heap.update(t, key);
                else heap.remove(t);
            }
        }
        out.shortfall = in_.n_return - n_taken;
        // Jobs scaled in and later preempted are reported as preempted only.
        size_t k = 0;
        for (size_t i = 0; i < out.scaled.size(); ++i) {
            const int64_t j = out.scaled[i];
            if (job_[j].status == 1) out.scaled[k++] = j;
        }
        out.scaled.resize(k);
        out.scaled_new_workers.reserve(k);
        for (int64_t j : out.scaled) out.scaled_new_workers.push_back(job_[j].workers);
    }

private:
    static void push_action(Output& out, int64_t s, int64_t j, int64_t kind, int64_t w, int64_t reason) {
        out.act_server.push_back(s);
        out.act_job.push_back(j);
        out.act_kind.push_back(kind);
        out.act_workers.push_back(w);
        out.act_reason.push_back(reason);
    }

    const Input& in_;
    Workspace& ws_;
    // Raw views of the workspace (sized in the constructor, not resized after).
    int64_t* srv_start_ = nullptr;   // CSR offsets by server
    int64_t* job_start_ = nullptr;   // CSR offsets by job
    int64_t* pl_job_ = nullptr;      // placements in server order: job,
    int64_t* pl_workers_ = nullptr;  //   workers,
    int64_t* pl_server_ = nullptr;   //   server
    int64_t* job_pl_ = nullptr;      // per job: positions in server order
    char* alive_ = nullptr;          // per position: placement still there
    JobState* job_ = nullptr;
    double* cost_ = nullptr;
    int64_t* touched_ = nullptr;
    int64_t* stamp_ = nullptr;
};

// Run the greedy into out (overwritten; its vectors keep their buffers, so a caller
// that reclaims many times, as the simulator's pass does, allocates nothing once
// they have grown).  Inputs must be validated by the caller (indices in range,
// workers >= 1, min_workers <= workers, (job, server) pairs unique).
// Thread-safe: each thread has its own workspace.
inline void greedy(const Input& in, Output& out) {
    thread_local Workspace ws;
    Greedy g(in, ws);
    g.run(out);
}
inline Output greedy(const Input& in) {
    Output out;
    greedy(in, out);
    return out;
}

}  // namespace reclaim
}  // namespace aryl
