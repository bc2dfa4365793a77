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
// O(placements on that server), bounded by the server's GPUs).
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

// Binary min-heap over item indices with a position table: update / remove in O(log m).
class IndexedHeap {
public:
    explicit IndexedHeap(int64_t m) : pos_(static_cast<size_t>(m), -1), key_(static_cast<size_t>(m)) {
        heap_.reserve(static_cast<size_t>(m));
    }
    bool empty() const { return heap_.empty(); }
    bool contains(int64_t i) const { return pos_[i] >= 0; }
    // Append without ordering; call heapify() once after the last append.
    void append(int64_t i, const Key& k) {
        key_[i] = k;
        pos_[i] = static_cast<int64_t>(heap_.size());
        heap_.push_back(i);
    }
    void heapify() {
        for (int64_t h = static_cast<int64_t>(heap_.size()) / 2 - 1; h >= 0; --h) down(h);
    }
    int64_t pop() {
        int64_t top = heap_[0];
        remove(top);
        return top;
    }
    void update(int64_t i, const Key& k) {
        int64_t h = pos_[i];
        bool smaller = k < key_[i];
        key_[i] = k;
        if (smaller) up(h); else down(h);
    }
    void remove(int64_t i) {
        int64_t h = pos_[i];
        int64_t last = heap_.back();
        heap_.pop_back();
        pos_[i] = -1;
        if (last == i) return;
        heap_[h] = last;
        pos_[last] = h;
        up(h);
        down(pos_[last]);
    }

private:
    void place(int64_t h, int64_t i) { heap_[h] = i; pos_[i] = h; }
    void up(int64_t h) {
        int64_t i = heap_[h];
        while (h > 0) {
            int64_t parent = (h - 1) / 2;
            int64_t pi = heap_[parent];
            if (!(key_[i] < key_[pi])) break;
            place(h, pi);
            h = parent;
        }
        place(h, i);
    }
    void down(int64_t h) {
        int64_t n = static_cast<int64_t>(heap_.size());
        int64_t i = heap_[h];
        for (;;) {
            int64_t c = 2 * h + 1;
            if (c >= n) break;
            if (c + 1 < n && key_[heap_[c + 1]] < key_[heap_[c]]) ++c;
            if (!(key_[heap_[c]] < key_[i])) break;
            place(h, heap_[c]);
            h = c;
        }
        place(h, i);
    }
    std::vector<int64_t> heap_;
    std::vector<int64_t> pos_;
    std::vector<Key> key_;
};

class Greedy {
public:
    explicit Greedy(const Input& in) : in_(in) {
        const int64_t m = in.n_servers, p = in.n_placements, J = in.n_jobs;
        // CSR by server and by job, stable in placement input order (counting sort).
        srv_start_.assign(static_cast<size_t>(m + 1), 0);
        job_start_.assign(static_cast<size_t>(J + 1), 0);
        for (int64_t q = 0; q < p; ++q) {
            ++srv_start_[in.placement_server[q] + 1];
            ++job_start_[in.placement_job[q] + 1];
        }
        for (int64_t s = 0; s < m; ++s) srv_start_[s + 1] += srv_start_[s];
        for (int64_t j = 0; j < J; ++j) job_start_[j + 1] += job_start_[j];
        srv_pl_.resize(static_cast<size_t>(p));
        job_pl_.resize(static_cast<size_t>(p));
        {
            std::vector<int64_t> fs(srv_start_.begin(), srv_start_.end() - 1);
            std::vector<int64_t> fj(job_start_.begin(), job_start_.end() - 1);
            for (int64_t q = 0; q < p; ++q) {
                srv_pl_[fs[in.placement_server[q]]++] = q;
                job_pl_[fj[in.placement_job[q]]++] = q;
            }
        }
        alive_.assign(static_cast<size_t>(p), 1);
        workers_.assign(in.job_workers, in.job_workers + J);
        shed_.resize(static_cast<size_t>(J));
        for (int64_t j = 0; j < J; ++j)
            shed_[j] = in.job_elastic[j] ? workers_[j] - in.job_min_workers[j] : 0;
        status_.assign(static_cast<size_t>(J), 0);
        cost_.assign(static_cast<size_t>(m), 0.0);
        touched_.assign(static_cast<size_t>(m), 0);
        stamp_.assign(static_cast<size_t>(m), 0);
    }

    // Current key of server s; false if ineligible.
    bool stats(int64_t s, Key& key) {
        double c = 0.0;
        int64_t touched = 0, busy = 0;
        for (int64_t a = srv_start_[s]; a < srv_start_[s + 1]; ++a) {
            const int64_t q = srv_pl_[a];
            if (!alive_[q]) continue;
            const int64_t j = in_.placement_job[q];
            const int64_t w = in_.placement_workers[q];
            ++touched;
            busy += w * in_.job_gpus_per_worker[j];
            if (w <= shed_[j]) continue;
            if (!in_.job_preemptible[j]) return false;
            c += static_cast<double>(w) / static_cast<double>(workers_[j]);
        }
        cost_[s] = c;
        touched_[s] = touched;
        key = Key{quantize_cost(c), touched, busy, in_.server_id[s]};
        return true;
    }

    Output run() {
        Output out;
        const int64_t m = in_.n_servers;
        IndexedHeap heap(m);
        Key key{};
        for (int64_t s = 0; s < m; ++s)
            if (in_.server_allowed[s] && stats(s, key)) heap.append(s, key);
        heap.heapify();

        std::vector<int64_t> affected;
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
                const int64_t q = srv_pl_[a];
                if (!alive_[q]) continue;
                alive_[q] = 0;
                const int64_t j = in_.placement_job[q];
                const int64_t w = in_.placement_workers[q];
                if (w <= shed_[j]) {
                    workers_[j] -= w;
                    shed_[j] -= w;
                    push_action(out, s, j, KIND_SCALE_IN, w, REASON_ELASTIC_SHED);
                    if (status_[j] == 0) {
                        status_[j] = 1;
                        out.scaled.push_back(j);
                    }
                } else {
                    push_action(out, s, j, KIND_PREEMPT, workers_[j],
                                in_.job_elastic[j] ? REASON_BELOW_BASE : REASON_RIGID_JOB);
                    status_[j] = 2;
                    out.preempted.push_back(j);
                    workers_[j] = 0;
                    shed_[j] = 0;
                }
                // Every other server of j changes (fewer workers, smaller budget, or job gone).
                for (int64_t b = job_start_[j]; b < job_start_[j + 1]; ++b) {
                    const int64_t r = job_pl_[b];
                    if (!alive_[r]) continue;
                    if (status_[j] == 2) alive_[r] = 0;
                    const int64_t t = in_.placement_server[r];
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
            if (status_[j] == 1) out.scaled[k++] = j;
        }
        out.scaled.resize(k);
        out.scaled_new_workers.reserve(k);
        for (int64_t j : out.scaled) out.scaled_new_workers.push_back(workers_[j]);
        return out;
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
    std::vector<int64_t> srv_start_, job_start_, srv_pl_, job_pl_;
    std::vector<char> alive_;
    std::vector<int64_t> workers_, shed_, status_;
    std::vector<double> cost_;
    std::vector<int64_t> touched_, stamp_;
};

// Run the greedy.  Inputs must be validated by the caller (indices in range,
// workers >= 1, min_workers <= workers, (job, server) pairs unique).
inline Output greedy(const Input& in) {
    Greedy g(in);
    return g.run();
}

}  // namespace reclaim
}  // namespace aryl
