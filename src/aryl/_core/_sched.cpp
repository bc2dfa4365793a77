// pybind11 module aryl._core._sched: the compiled scheduling pass and simulator
// engine (algorithms in sched_*.hpp and sim_engine.hpp, no Python there).
//
// Private: use aryl.schedule(..., backend="native") and
// aryl.sim.simulate(config=SimConfig(engine="native")); aryl/sim/native.py and
// aryl/scheduling/native.py prepare and validate the inputs.
//
// * Engine: one replay (new_engine(dict) -> Engine; Engine.run(max_iterations)
//   in chunks, the GIL released; results as numpy arrays).
// * schedule_state(state, policy...): one pass over a Python ClusterState, read
//   directly through the CPython API (no intermediate copies), returned as
//   plain tuples that aryl/scheduling/native.py turns into a SchedulePlan.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim: give the freed blocks of a replay back at once
#endif
#include <utility>
#include <vector>

#include "sched_callback.hpp"
#include "sim_engine.hpp"
#if __has_include("sched_aryl_bind.hpp")
#include "sched_aryl_bind.hpp"  // test hooks of the aryl pass's building blocks (C2)
#define ARYL_SCHED_BIND_TESTING 1
#endif

namespace py = pybind11;
using aryl::sched::i64;
namespace S = aryl::sched;
namespace M = aryl::sim;

namespace {

template <typename T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
    py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

// A numpy array that takes over a vector's memory (no copy).
template <typename T>
py::array_t<T> move_to_numpy(std::vector<T>&& v) {
    auto* owned = new std::vector<T>(std::move(v));
    py::capsule owner(owned, [](void* p) { delete reinterpret_cast<std::vector<T>*>(p); });
    return py::array_t<T>(static_cast<py::ssize_t>(owned->size()), owned->data(), owner);
}

template <typename T, typename Out = T>
py::array_t<Out> drain_to_numpy(M::ChunkedColumn<T>& c) {
    py::array_t<Out> a(static_cast<py::ssize_t>(c.size()));
    c.drain(a.mutable_data());
    return a;
}

// A 1-D C-contiguous array of T: the given one when its dtype is T (no copy), else
// a converted copy.
template <typename T>
py::array_t<T, py::array::c_style | py::array::forcecast> col_view(const py::handle& h) {
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw py::type_error("expected an array");
    if (a.ndim() != 1) throw py::value_error("expected a 1-D array");
    return a;
}

template <typename T>
std::vector<T> vec(const py::handle& h) {
    auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw py::type_error("expected an array");
    if (a.ndim() != 1) throw py::value_error("expected a 1-D array");
    return std::vector<T>(a.data(), a.data() + a.shape(0));
}

// ------------------------------------------------------------- speed model
void set_speeds(S::State& st, const py::dict& d) {
    st.has_speeds = d["has_speeds"].cast<bool>();
    if (!st.has_speeds) return;
    st.speeds.factor = d["factors"].cast<std::vector<double>>();
    st.speeds.ref_type = d["ref_type"].cast<i64>();
    st.speeds.lut.clear();
    for (const auto& fam : d["luts"].cast<py::list>()) {
        std::vector<std::vector<double>> per_type;
        for (const auto& row : fam.cast<py::list>()) per_type.push_back(vec<double>(row));
        st.speeds.lut.push_back(std::move(per_type));
    }
}

void set_config(S::Config& c, const py::dict& d) {
    c.rescale_pause_s = d["rescale_pause_s"].cast<double>();
    c.checkpoint_interval_s = d["checkpoint_interval_s"].cast<double>();
    c.restart_cost_s = d["restart_cost_s"].cast<double>();
    c.loan_reserve_servers = d["loan_reserve_servers"].cast<i64>();
    c.loan_cooldown_s = d["loan_cooldown_s"].cast<double>();
    c.starvation_bound_s = d["starvation_bound_s"].cast<double>();
    c.reclaim_policy = d["reclaim_policy"].cast<int>();
    c.seed = d["seed"].cast<i64>();
    c.mix_gpu_types = d["mix_gpu_types"].cast<bool>();
}

// ------------------------------------------------ a Python policy (P_CALLBACK)
// The decide step of an aryl.Policy: once per pass, `fn(statics, pass)`
// (aryl/scheduling/user.py _Bridge) with the static columns (a dict of numpy
// arrays, built once per replay) and a CallbackPass (this pass's arrays, each
// built on its first access in the pass, so a pass costs what the policy reads);
// it returns None or the aryl.Decision, read here directly (its lists of
// (job, {server: workers}) and job indexes; anything else goes through
// Decision.to_arrays, which converts it or raises PolicyError), checked by
// sched_callback.hpp plan_decision.  Python exceptions propagate unchanged.
// What changed in the engine's state since the previous read of a pass's
// `changes` in this replay (aryl.PassView.changes; the adapter of
// aryl.scheduling.twin keeps a ClusterState in step with it).  A snapshot of
// the jobs that were queued or running at the last read (their dynamic fields,
// bit for bit), of the servers' status and of the queue's and the running
// set's order; a read compares the state with it in O(queued + running +
// servers) and reports only what differs.
// What changed in the engine's state since the previous read of a pass's
// `changes` in this replay (aryl.PassView.changes; aryl.scheduling.twin keeps a
// ClusterState in step with it).  A snapshot of the jobs that were queued or
// running at the last read, of the servers' status and of the order of the
// queue and of the running set; a read compares the state with it in
// O(queued + running + servers) and reports only what differs.
//
// The comparison reads a job's signature, not all its fields: its status and
// start sequence (run_seq; a job started again since has a new one), and for a
// running job its placement, progress_at_s, attained_at_s and speed.  That is
// enough because the State changes a job's fields only in its mutators: a
// waiting job's fields stay as they are until it starts (enqueue sets them
// all, and a job queued again was started in between); a running job's change
// (a resize or move, a preemption, a finish) changes its placement or status,
// or brings its progress (advance) and GPU-seconds (close_attained) up to now,
// and a resize to the same placement that changes neither sets a new
// progress_at_s or nothing at all.
struct ChangeTracker {
    struct Snap {
        int8_t status = S::PENDING;
        i64 run_seq = -1;
        double progress_at_s = 0.0, attained_at_s = 0.0, speed = 0.0;
        i64 epoch = -1;  // of the last visit (dedupe within a read)
    };
    bool ready = false;
    std::vector<Snap> snap;
    S::PlacementTable placement;  // of jobs running at the last read
    i64 epoch = 0;
    std::vector<i64> queue_order, running_order;  // at the last read
    std::vector<i64> scratch;
    std::vector<int8_t> server_status;
    std::vector<double> server_reclaimed_s;

    static bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
    // (jobs, servers, queue_moved, running_moved): jobs as tuples (job, status,
    // placement dict or None, remaining_s, progress_at_s, speed,
    // checkpoint_remaining_s, next_checkpoint_s, queued_since_s, waited_s,
    // attained_gpu_s, attained_at_s, restarted), in the order: no longer queued
    // or running, then queued (queue order), then running (start order);
    // servers as (server, status, reclaimed_s).  ClusterState.apply_changes
    // reads it.
    py::tuple read(const S::State& st) {
        const size_t n = static_cast<size_t>(st.n_jobs());
        const size_t ns = static_cast<size_t>(st.n_servers());
        if (!ready) {
            snap.assign(n, Snap{});
            placement.assign(n, {});
            server_status.assign(ns, -1);
            server_reclaimed_s.assign(ns, 0.0);
            ready = true;
        }
        ++epoch;
        py::list jobs;
        auto visit = [&](i64 j) {
            const auto u = static_cast<size_t>(j);
            Snap& sn = snap[u];
            if (sn.epoch == epoch) return;
            sn.epoch = epoch;
            const int8_t s = st.status[u];
            const S::Placement& pl = st.placement[u];
            if (s == sn.status && st.run_seq[u] == sn.run_seq) {
                if (s == S::QUEUED) return;
                if (s == S::RUNNING && same_bits(st.progress_at_s[u], sn.progress_at_s) &&
                    same_bits(st.attained_at_s[u], sn.attained_at_s) && same_bits(st.speed[u], sn.speed) &&
                    pl == placement[u])
                    return;
            }
            sn.status = s;
            sn.run_seq = st.run_seq[u];
            sn.progress_at_s = st.progress_at_s[u];
            sn.attained_at_s = st.attained_at_s[u];
            sn.speed = st.speed[u];
            if (s == S::RUNNING) placement.set(u, pl);
            else placement.clear(u);
            py::object place = py::none();
            if (!pl.empty()) {
                py::dict d;
                for (const auto& e : pl) d[py::int_(e.first)] = py::int_(e.second);
                place = d;
            }
            jobs.append(py::make_tuple(j, static_cast<int>(s), place, st.remaining_s[u], st.progress_at_s[u],
                                       st.speed[u], st.checkpoint_remaining_s[u], st.next_checkpoint_s[u],
                                       st.queued_since_s[u], st.waited_s[u], st.attained_gpu_s[u],
                                       st.attained_at_s[u], static_cast<bool>(st.restarted[u])));
        };
        // the jobs queued or running at the last read (those that left included)
        for (i64 j : queue_order) visit(j);
        for (i64 j : running_order) visit(j);
        // a set's members now (new ones visited), and those from the first
        // position where its order leaves the last read's (filtered to the
        // members now): queue_moved / running_moved
        auto walk = [&](const S::OrderedSet& set, int8_t want, std::vector<i64>& order) {
            py::list out;
            scratch.clear();
            size_t bi = 0;
            bool diverged = false;
            for (i64 j : set) {
                visit(j);
                if (!diverged) {
                    while (bi < order.size() && st.status[static_cast<size_t>(order[bi])] != want) ++bi;
                    if (bi < order.size() && order[bi] == j) ++bi;
                    else diverged = true;
                }
                if (diverged) out.append(py::int_(j));
                scratch.push_back(j);
            }
            order.swap(scratch);
            return out;
        };
        py::list q_moved = walk(st.queued, S::QUEUED, queue_order);
        py::list r_moved = walk(st.running, S::RUNNING, running_order);
        py::list servers;
        for (size_t s = 0; s < ns; ++s) {
            if (st.server_status[s] == server_status[s] &&
                same_bits(st.server_reclaimed_s[s], server_reclaimed_s[s]))
                continue;
            server_status[s] = st.server_status[s];
            server_reclaimed_s[s] = st.server_reclaimed_s[s];
            servers.append(py::make_tuple(static_cast<i64>(s), static_cast<int>(st.server_status[s]),
                                          st.server_reclaimed_s[s]));
        }
        return py::make_tuple(jobs, servers, q_moved, r_moved);
    }
};

struct CallbackHolder {
    ChangeTracker changes;          // aryl.PassView.changes (kept across the replay's passes)
    // aryl.scheduling.twin: called instead of fn, with the pass as plain values
    // (now_s, the 4 lists of `changes`, last_reclaim_s, servers_needed, free,
    // loaned, offered, capacity_gpus): no view object
    py::object twin_fn;
    py::object fn;                  // (statics dict, CallbackPass) -> None | aryl.Decision
    py::object job_label;           // job index -> job id (messages only)
    py::object to_arrays;           // (decision, now_s) -> the 9 int64 arrays (Decision.to_arrays)
    py::object statics = py::none();  // built at the first pass (the static columns)
    i64 statics_n = -1;
    bool only_starts = false;       // aryl.Policy.only_starts (the skip rule in callback_decide)
};

template <typename T>
py::array_t<T> ro_copy(const T* p, size_t n) {
    py::array_t<T> a(static_cast<py::ssize_t>(n));
    if (n) std::memcpy(a.mutable_data(), p, n * sizeof(T));
    return a;
}
// clear NPY_ARRAY_WRITEABLE (the policy reads, never writes, the engine's values)
inline py::array frozen(py::array a) {
    py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    return a;
}
template <typename T>
py::array frozen_vec(const std::vector<T>& v) {
    return frozen(ro_copy(v.data(), v.size()));
}

// The static columns, once per replay (copies: valid after the replay too).
py::dict callback_statics(const S::Policy& pol, const S::State& st) {
    const size_t n = static_cast<size_t>(st.n_jobs());
    py::dict d;
    d["arrival_s"] = frozen(ro_copy(st.arrival_s.data(), n));
    d["gpus_per_worker"] = frozen(ro_copy(st.gpus_per_worker.to_i64().data(), n));
    d["ref_workers"] = frozen(ro_copy(st.ref_workers.to_i64().data(), n));
    d["min_workers"] = frozen(ro_copy(st.min_workers.to_i64().data(), n));
    d["max_workers"] = frozen(ro_copy(st.max_workers.to_i64().data(), n));
    d["alpha"] = frozen(ro_copy(st.alpha.data(), n));
    d["rescale_pause_s"] = st.config.rescale_pause_s;
    py::array_t<bool> el(static_cast<py::ssize_t>(n));
    py::array_t<i64> base(static_cast<py::ssize_t>(n)), top(static_cast<py::ssize_t>(n));
    const size_t nty = st.gpu_types.size();
    // each job's speed at its base size on each GPU type, relative to its traced speed
    py::array_t<double> speed({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(nty)});
    bool* pe = el.mutable_data();
    i64* pb = base.mutable_data();
    i64* pt = top.mutable_data();
    double* ps = speed.mutable_data();
    for (size_t u = 0; u < n; ++u) {
        const i64 j = static_cast<i64>(u);
        pe[u] = st.elastic[u] != 0;
        pb[u] = pol.base_workers(st, j);
        pt[u] = (pol.elastic && st.elastic[u]) ? st.max_workers[u] : st.ref_workers[u];
        for (size_t t = 0; t < nty; ++t)
            ps[u * nty + t] = st.throughput_on(j, static_cast<i64>(t), pb[u]) / st.ref_throughput[u];
    }
    d["elastic"] = frozen(el);
    d["base_workers"] = frozen(base);
    d["top_workers"] = frozen(top);
    d["speed"] = frozen(speed);
    d["server_gpus"] = frozen_vec(st.server_gpus);
    d["server_type"] = frozen_vec(st.server_type);
    d["server_pool"] = frozen_vec(st.server_pool_idx);
    d["n_training"] = st.n_training();
    d["gpu_types"] = st.gpu_types;
    std::vector<double> factor(nty, 1.0);
    if (st.has_speeds)
        for (size_t t = 0; t < nty && t < st.speeds.factor.size(); ++t) factor[t] = st.speeds.factor[t];
    d["type_factor"] = frozen_vec(factor);
    return d;
}

// One pass as the policy sees it (aryl.PassView's per-pass attributes): each
// array is built on its first read, a read-only copy of the engine's values
// (O(its length); the queue's from the engine's arrival-order index).  Copies,
// not views of the engine's buffers: those change when the pass's decision is
// applied and are freed with the engine, while a policy may keep an array.
// Valid during the decide call only (the binding clears `st` after it).
struct CallbackPass {
    const S::State* st = nullptr;
    const S::PassContext* ctx = nullptr;
    double now_s = 0.0;
    ChangeTracker* tracker = nullptr;
    py::object changes_read;  // this pass's read of `changes` (one per pass)
    py::object csr[3];  // running_ptr, running_server, running_server_workers (built together)

    const S::State& state() const {
        if (!st)
            throw py::value_error("aryl.PassView: this pass is over (its arrays are read during "
                                  "decide; copy what you keep)");
        return *st;
    }
    template <typename F>
    py::array queue_col(F&& f) const {  // f(job) for each queued job, arrival order
        const S::State& s = state();
        using T = decltype(f(i64{}));
        py::array_t<T> a(static_cast<py::ssize_t>(s.queued.size()));
        if (!s.queued.empty()) {
            T* p = a.mutable_data();
            size_t i = 0;
            for (const auto& e : s.sorted_queue(S::Q_ARRIVAL)) p[i++] = f(e.second);
        }
        return frozen(a);
    }
    template <typename F>
    py::array running_col(F&& f) const {  // f(job) for each running job, start order
        const S::State& s = state();
        using T = decltype(f(i64{}));
        py::array_t<T> a(static_cast<py::ssize_t>(s.running.size()));
        T* p = a.mutable_data();
        size_t i = 0;
        for (i64 j : s.running) p[i++] = f(j);
        return frozen(a);
    }
    py::object placements(int which) {
        if (csr[0].ptr() == nullptr) {
            const S::State& s = state();
            const size_t r = static_cast<size_t>(s.running.size());
            size_t n_entries = 0;
            for (i64 j : s.running) n_entries += s.placement[static_cast<size_t>(j)].size();
            py::array_t<i64> ptr(static_cast<py::ssize_t>(r + 1)), srv(static_cast<py::ssize_t>(n_entries)),
                srv_w(static_cast<py::ssize_t>(n_entries));
            i64 *p_ptr = ptr.mutable_data(), *p_srv = srv.mutable_data(), *p_sw = srv_w.mutable_data();
            size_t i = 0, k = 0;
            p_ptr[0] = 0;
            for (i64 j : s.running) {
                for (const auto& e : s.placement[static_cast<size_t>(j)]) {
                    p_srv[k] = e.first;
                    p_sw[k] = e.second;
                    ++k;
                }
                p_ptr[++i] = static_cast<i64>(k);
            }
            csr[0] = frozen(ptr);
            csr[1] = frozen(srv);
            csr[2] = frozen(srv_w);
        }
        return csr[which];
    }
};

void bind_callback_pass(py::module_& m) {
    using P = CallbackPass;
    py::class_<P>(m, "CallbackPass", "One pass of a Python policy (aryl.PassView reads it).")
        .def_readonly("now_s", &P::now_s)
        .def_property_readonly("valid", [](const P& p) { return p.st != nullptr; })
        .def_property_readonly("queue", [](const P& p) { return p.queue_col([](i64 j) { return j; }); })
        .def_property_readonly("queue_remaining_s", [](const P& p) {
            const S::State& s = p.state();
            return p.queue_col([&s](i64 j) { return s.remaining_s[static_cast<size_t>(j)]; });
        })
        .def_property_readonly("queue_waited_s", [](const P& p) {
            const S::State& s = p.state();
            const double now = s.now_s;
            return p.queue_col([&s, now](i64 j) { return s.queue_age_s(j, now); });
        })
        .def_property_readonly("queue_attained_gpu_s", [](const P& p) {
            const S::State& s = p.state();
            return p.queue_col([&s](i64 j) { return s.attained_gpu_s[static_cast<size_t>(j)]; });
        })
        .def_property_readonly("running", [](const P& p) { return p.running_col([](i64 j) { return j; }); })
        .def_property_readonly("running_workers", [](const P& p) {
            const S::State& s = p.state();
            return p.running_col([&s](i64 j) { return s.workers[static_cast<size_t>(j)]; });
        })
        .def_property_readonly("running_ptr", [](P& p) { return p.placements(0); })
        .def_property_readonly("running_server", [](P& p) { return p.placements(1); })
        .def_property_readonly("running_server_workers", [](P& p) { return p.placements(2); })
        .def_property_readonly("running_remaining_s", [](const P& p) {
            const S::State& s = p.state();
            const double now = s.now_s;
            return p.running_col([&s, now](i64 j) { return s.remaining_at(j, now); });
        })
        .def_property_readonly("running_speed", [](const P& p) {
            const S::State& s = p.state();
            return p.running_col([&s](i64 j) { return s.speed[static_cast<size_t>(j)]; });
        })
        .def_property_readonly("running_attained_gpu_s", [](const P& p) {
            const S::State& s = p.state();
            const double now = s.now_s;
            return p.running_col([&s, now](i64 j) { return s.attained_at(j, now); });
        })
        .def_property_readonly("free_gpus", [](const P& p) {
            p.state();
            return frozen_vec(*p.ctx->free);
        })
        .def_property_readonly("loaned", [](const P& p) {
            p.state();
            return frozen_vec(p.ctx->loaned);
        })
        .def_property_readonly("offered", [](const P& p) {
            p.state();
            return frozen_vec(p.ctx->offered);
        })
        .def_property_readonly("server_status", [](const P& p) { return frozen_vec(p.state().server_status); })
        .def_property_readonly("capacity_gpus", [](const P& p) {
            p.state();
            return p.ctx->capacity_gpus;
        })
        .def_property_readonly("servers_needed", [](const P& p) { return p.state().servers_needed; })
        .def_property_readonly("last_reclaim_s", [](const P& p) { return p.state().last_reclaim_s; })
        .def_property_readonly("changes", [](P& p) {
            const S::State& s = p.state();
            if (p.changes_read.ptr() == nullptr) p.changes_read = p.tracker->read(s);
            return p.changes_read;
        });
}

// The skip rule of a policy with only_starts (documented at aryl.Policy.only_starts):
// nothing can start when, for every queued job j, the servers a placement may use
// (the training servers and `loaned`) hold fewer than base_workers(j) whole
// workers of gpus_per_worker(j) GPUs (sum over s of floor(free_s / g) <
// base_workers, a necessary condition of plan_decision's rules), e.g. when the
// queue is empty; a policy that only starts jobs then decides nothing, so its
// call is skipped.  O(queued + servers x distinct worker sizes in the queue).
bool nothing_can_start(const S::Policy& pol, const S::State& st, const S::PassContext& ctx) {
    if (st.queued.empty()) return true;
    const std::vector<i64>& free = *ctx.free;
    const i64 nt = st.n_training();
    i64 total = 0;
    for (i64 s = 0; s < nt; ++s) total += free[static_cast<size_t>(s)];
    for (i64 s : ctx.loaned) total += free[static_cast<size_t>(s)];
    if (total <= 0) return true;
    std::vector<std::pair<i64, i64>> slots;  // (GPUs per worker, whole workers the free GPUs hold)
    for (i64 j : st.queued) {
        const i64 g = st.gpus_per_worker[static_cast<size_t>(j)];
        const i64 w = pol.base_workers(st, j);
        if (w * g > total) continue;
        i64 room = -1;
        for (const auto& e : slots)
            if (e.first == g) room = e.second;
        if (room < 0) {
            room = 0;
            for (i64 s = 0; s < nt; ++s) room += free[static_cast<size_t>(s)] / g;
            for (i64 s : ctx.loaned) room += free[static_cast<size_t>(s)] / g;
            slots.emplace_back(g, room);
        }
        if (w <= room) return false;
    }
    return true;
}

// Fast reader of Decision's lists: [(job, {server: workers}), ...] with exact
// ints, tuples and dicts; false for anything else (the caller falls back to
// Decision.to_arrays, which converts other integer types or raises PolicyError).
bool read_moves(PyObject* lst, std::vector<i64>& job, std::vector<i64>& ptr, std::vector<i64>& srv,
                std::vector<i64>& wk) {
    if (!PyList_CheckExact(lst)) return false;
    const Py_ssize_t n = PyList_GET_SIZE(lst);
    ptr.push_back(0);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* m = PyList_GET_ITEM(lst, i);
        if (!PyTuple_CheckExact(m) || PyTuple_GET_SIZE(m) != 2) return false;
        PyObject* j = PyTuple_GET_ITEM(m, 0);
        PyObject* place = PyTuple_GET_ITEM(m, 1);
        if (!PyLong_CheckExact(j) || !PyDict_CheckExact(place)) return false;
        int overflow = 0;
        const long long jv = PyLong_AsLongLongAndOverflow(j, &overflow);
        if (overflow) return false;
        job.push_back(static_cast<i64>(jv));
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(place, &pos, &k, &v)) {
            if (!PyLong_CheckExact(k) || !PyLong_CheckExact(v)) return false;
            const long long kv = PyLong_AsLongLongAndOverflow(k, &overflow);
            if (overflow) return false;
            const long long vv = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (overflow) return false;
            srv.push_back(static_cast<i64>(kv));
            wk.push_back(static_cast<i64>(vv));
        }
        ptr.push_back(static_cast<i64>(srv.size()));
    }
    return true;
}
bool read_jobs(PyObject* lst, std::vector<i64>& job) {
    if (!PyList_CheckExact(lst)) return false;
    const Py_ssize_t n = PyList_GET_SIZE(lst);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* j = PyList_GET_ITEM(lst, i);
        if (!PyLong_CheckExact(j)) return false;
        int overflow = 0;
        const long long jv = PyLong_AsLongLongAndOverflow(j, &overflow);
        if (overflow) return false;
        job.push_back(static_cast<i64>(jv));
    }
    return true;
}

void callback_decide(CallbackHolder& h, const S::Policy& pol, const S::State& st,
                     const S::PassContext& ctx, S::Plan& plan) {
    if (h.only_starts && nothing_can_start(pol, st, ctx)) return;
    py::gil_scoped_acquire gil;
    if (!h.twin_fn && h.statics_n != st.n_jobs()) {
        h.statics = callback_statics(pol, st);
        h.statics_n = st.n_jobs();
    }
    py::object out;
    if (h.twin_fn) {
        py::tuple c = h.changes.read(st);
        out = h.twin_fn(st.now_s, c[0], c[1], c[2], c[3], st.last_reclaim_s, st.servers_needed,
                        py::cast(*ctx.free), py::cast(ctx.loaned), py::cast(ctx.offered), ctx.capacity_gpus);
    } else {
        py::object pobj = py::cast(CallbackPass{&st, &ctx, st.now_s, &h.changes, {}, {}});
        CallbackPass* pass = pobj.cast<CallbackPass*>();
        try {
            out = h.fn(h.statics, pobj);
        } catch (...) {
            pass->st = nullptr;
            throw;
        }
        pass->st = nullptr;  // the view's arrays not read yet can no longer be built
        pass->ctx = nullptr;
    }
    if (out.is_none()) return;
    // the decision's lists, read directly (the common case) or through to_arrays
    std::vector<i64> v[9];
    bool fast = true;
    {
        py::object starts = out.attr("starts"), resizes = out.attr("resizes"),
                   pre = out.attr("preemptions");
        fast = read_moves(starts.ptr(), v[0], v[1], v[2], v[3]) &&
               read_moves(resizes.ptr(), v[4], v[5], v[6], v[7]) && read_jobs(pre.ptr(), v[8]);
    }
    S::DecisionArrays d;
    using A = py::array_t<i64, py::array::c_style | py::array::forcecast>;
    A a[9];
    if (fast) {
        d.start_job = v[0].data();
        d.start_ptr = v[1].data();
        d.start_server = v[2].data();
        d.start_workers = v[3].data();
        d.n_starts = static_cast<i64>(v[0].size());
        d.n_start_entries = static_cast<i64>(v[2].size());
        d.resize_job = v[4].data();
        d.resize_ptr = v[5].data();
        d.resize_server = v[6].data();
        d.resize_workers = v[7].data();
        d.n_resizes = static_cast<i64>(v[4].size());
        d.n_resize_entries = static_cast<i64>(v[6].size());
        d.preempt_job = v[8].data();
        d.n_preemptions = static_cast<i64>(v[8].size());
    } else {
        py::tuple t = h.to_arrays(out, st.now_s).cast<py::tuple>();
        if (t.size() != 9) throw py::value_error("policy bridge: expected 9 arrays");
        for (size_t i = 0; i < 9; ++i) {
            a[i] = A::ensure(t[i]);
            if (!a[i] || a[i].ndim() != 1) throw py::value_error("policy bridge: expected 1-D int64 arrays");
        }
        if (a[1].shape(0) != a[0].shape(0) + 1 || a[2].shape(0) != a[3].shape(0) ||
            a[5].shape(0) != a[4].shape(0) + 1 || a[6].shape(0) != a[7].shape(0))
            throw py::value_error("policy bridge: inconsistent array lengths");
        d.start_job = a[0].data();
        d.start_ptr = a[1].data();
        d.start_server = a[2].data();
        d.start_workers = a[3].data();
        d.n_starts = a[0].shape(0);
        d.n_start_entries = a[2].shape(0);
        d.resize_job = a[4].data();
        d.resize_ptr = a[5].data();
        d.resize_server = a[6].data();
        d.resize_workers = a[7].data();
        d.n_resizes = a[4].shape(0);
        d.n_resize_entries = a[6].shape(0);
        d.preempt_job = a[8].data();
        d.n_preemptions = a[8].shape(0);
    }
    if (h.only_starts && (d.n_resizes || d.n_preemptions))
        throw S::PolicyDecisionError("policy '" + pol.label() + "' at t = " + S::detail::time_repr(st.now_s) +
                                     " s: the decision " + (d.n_resizes ? "resizes" : "preempts") +
                                     " a job, but the policy declares only_starts = True (it may only "
                                     "start queued jobs)");
    S::plan_decision(pol, st, ctx, d, plan, [&h](i64 j) { return py::str(h.job_label(j)).cast<std::string>(); });
}

S::Policy make_policy(const py::dict& d) {
    S::Policy p = S::Policy::make(d["kind"].cast<int>());
    if (p.kind == S::P_CALLBACK) {
        p.name = d["name"].cast<std::string>();
        p.loans = d["loans"].cast<bool>();
        p.elastic = d["elastic"].cast<bool>();
        p.uses_tick = d["uses_tick"].cast<bool>();
        p.loans_for_growth = d.contains("loans_for_growth") && d["loans_for_growth"].cast<bool>();
        auto holder = std::make_shared<CallbackHolder>();
        holder->fn = d["decide"];
        holder->job_label = d["job_label"];
        holder->to_arrays = d["to_arrays"];
        holder->only_starts = d["only_starts"].cast<bool>();
        if (d.contains("twin_decide") && !d["twin_decide"].is_none()) holder->twin_fn = d["twin_decide"];
        p.callback = [holder](const S::Policy& pol, const S::State& st, const S::PassContext& ctx,
                              S::Plan& plan) { callback_decide(*holder, pol, st, ctx, plan); };
    }
    p.return_idle_loans = d["return_idle_loans"].cast<bool>();
    if (!d["bound_option"].is_none()) {
        p.has_bound = true;
        p.bound_option = d["bound_option"].cast<double>();
    }
    p.las_thresholds = d["las_thresholds"].cast<std::vector<double>>();
    return p;
}

// The reclaim request as a dict of numpy arrays (the hook's and reclaim_request's).
py::dict request_dict(const S::ReclaimRequestArrays& req) {
    py::dict d;
    d["server_id"] = to_numpy(req.server_id);
    d["server_gpus"] = to_numpy(req.server_gpus);
    d["placement_job"] = to_numpy(req.placement_job);
    d["placement_server"] = to_numpy(req.placement_server);
    d["placement_workers"] = to_numpy(req.placement_workers);
    d["job_id"] = to_numpy(req.job_id);
    d["job_workers"] = to_numpy(req.job_workers);
    d["job_gpus_per_worker"] = to_numpy(req.job_gpus_per_worker);
    d["job_min_workers"] = to_numpy(req.job_min_workers);
    d["job_elastic"] = to_numpy(req.job_elastic);
    d["job_preemptible"] = to_numpy(req.job_preemptible);
    d["n_servers"] = req.n_servers;
    return d;
}

// The hook for the comparison reclaim policies: fn(request dict, policy, seed) ->
// (servers, preempted), run with the GIL held.
S::ReclaimHook make_hook(py::object fn) {
    if (fn.is_none()) return S::ReclaimHook();
    auto holder = std::make_shared<py::object>(std::move(fn));
    return [holder](const S::ReclaimRequestArrays& req, int policy, i64 seed,
                    std::vector<i64>& servers, std::vector<i64>& preempted) {
        py::gil_scoped_acquire gil;
        py::dict d = request_dict(req);
        py::tuple out = (*holder)(d, policy, seed);
        servers = out[0].cast<std::vector<i64>>();
        preempted = out[1].cast<std::vector<i64>>();
    };
}

// ------------------------------------------------------------- the engine
std::unique_ptr<M::Engine> new_engine(const py::dict& d) {
    auto eng = std::make_unique<M::Engine>();
    S::State& st = eng->st;
    set_config(st.config, d["config"].cast<py::dict>());
    // servers
    const auto training = vec<uint8_t>(d["server_training"]);
    const auto gpus = vec<i64>(d["server_gpus"]);
    const auto pool = vec<i64>(d["server_pool_idx"]);
    const auto type = vec<i64>(d["server_type"]);
    const auto status = vec<int8_t>(d["server_status"]);
    for (size_t s = 0; s < gpus.size(); ++s)
        st.add_server(training[s] != 0, gpus[s], pool[s], type[s], status[s], -S::kInf);
    st.gpu_types = d["gpu_types"].cast<std::vector<std::string>>();
    st.n_pools = d["n_pools"].cast<i64>();
    st.busy_by_pool.resize(static_cast<size_t>(st.n_pools), 0);
    st.loaned_gpus_by_pool.resize(static_cast<size_t>(st.n_pools), 0);
    set_speeds(st, d["speeds"].cast<py::dict>());
    // jobs
    // read in place (an array of the right dtype is not copied; a million jobs'
    // columns are not held twice while the state is built)
    const auto arrival = col_view<double>(d["arrival_s"]);
    const auto gpw = col_view<i64>(d["gpus_per_worker"]);
    const auto ref = col_view<i64>(d["ref_workers"]);
    const auto rem = col_view<double>(d["remaining_s"]);
    const auto mn = col_view<i64>(d["min_workers"]);
    const auto mx = col_view<i64>(d["max_workers"]);
    const auto el = col_view<uint8_t>(d["elastic"]);
    const auto al = col_view<double>(d["alpha"]);
    const i64 n = static_cast<i64>(arrival.shape(0));
    for (const py::ssize_t m : {gpw.shape(0), ref.shape(0), rem.shape(0), mn.shape(0),
                                mx.shape(0), el.shape(0), al.shape(0)})
        if (m != n) throw py::value_error("new_engine: job columns of different lengths");
    // family: one index per job, or None (no families: -1 for every job)
    const bool has_fam = !d["family"].is_none();
    py::array_t<i64, py::array::c_style | py::array::forcecast> fam;
    if (has_fam) {
        fam = col_view<i64>(d["family"]);
        if (fam.shape(0) != n) throw py::value_error("new_engine: family: wrong length");
    }
    const double* p_arr = arrival.data();
    const i64 *p_gpw = gpw.data(), *p_ref = ref.data(), *p_mn = mn.data(), *p_mx = mx.data();
    const double *p_rem = rem.data(), *p_al = al.data();
    const uint8_t* p_el = el.data();
    const i64* p_fam = has_fam ? fam.data() : nullptr;
    st.reserve_jobs(n);
    for (i64 j = 0; j < n; ++j) {
        st.set_job(j, p_arr[j], p_gpw[j], p_ref[j], p_rem[j], p_mn[j], p_mx[j], p_el[j] != 0,
                   p_al[j], p_fam ? p_fam[j] : -1);
    }
    eng->pol = make_policy(d["policy"].cast<py::dict>());
    M::EngineSetup& c = eng->cfg;
    c.t0 = d["t0"].cast<double>();
    c.has_horizon = !d["horizon_s"].is_none();
    if (c.has_horizon) c.horizon_s = d["horizon_s"].cast<double>();
    c.tick_s = d["tick_s"].cast<double>();
    c.reclaim_grace_s = d["reclaim_grace_s"].cast<double>();
    c.ts_step_s = d["timeseries_step_s"].cast<double>();
    c.record_events = d["record_events"].cast<bool>();
    c.check = d["check"].cast<bool>();
    c.n_inf = d["n_inf"].cast<i64>();
    c.has_inference = !d["inf_offsets_s"].is_none();
    if (c.has_inference) {
        c.inf_offsets_s = vec<double>(d["inf_offsets_s"]);
        c.inf_servers_needed = vec<i64>(d["inf_servers_needed"]);
        c.inf_period_s = d["inf_period_s"].cast<double>();
    }
    c.slots = d["slots"].cast<std::vector<std::vector<std::pair<i64, i64>>>>();
    c.duration_s = vec<double>(d["duration_s"]);
    eng->reclaim_hook = make_hook(d["reclaim_hook"]);
    eng->ws.record_requests = d["record_requests"].cast<bool>();
    eng->init();
    return eng;
}

bool engine_run(M::Engine& eng, i64 max_iterations) {
    if (eng.reclaim_hook || eng.pol.callback)  // the hook / the policy calls into Python
        return eng.run(max_iterations);
    py::gil_scoped_release release;
    return eng.run(max_iterations);
}

// The results of an ended replay, moved out of the engine without copies: its
// per-job vectors become numpy arrays that own them (int32 columns stay int32:
// the caller widens them one at a time, once the state that no result reads is
// gone), the event log is drained block by block, the time series comes as its
// columns.  The per-job GPU-seconds by pool stay in the engine for
// engine_pool_split.  Call once, after run() returned True.
py::dict engine_results(M::Engine& eng) {
    if (!eng.finished) throw py::value_error("results: the replay has not ended");
    S::State& st = eng.st;
    const i64 n_jobs = st.n_jobs();  // (before the job columns are moved out)
    // first free the per-job state that no result reads, so that the result
    // arrays do not come on top of it
    eng.release_loop_state();
    py::dict r;
    r["status"] = move_to_numpy(std::move(st.status));
    r["waited_s"] = move_to_numpy(std::move(st.waited_s));
    r["queued_since_s"] = move_to_numpy(std::move(st.queued_since_s));
    r["attained_gpu_s"] = move_to_numpy(std::move(st.attained_gpu_s));
    r["remaining_s"] = move_to_numpy(std::move(st.remaining_s));
    r["first_start"] = move_to_numpy(std::move(eng.first_start));
    r["finish_t"] = move_to_numpy(std::move(eng.finish_t));
    r["n_preempt"] = move_to_numpy(eng.n_preempt.take());  // int32
    r["n_scale_in"] = move_to_numpy(eng.n_scale_in.take());
    r["n_scale_out"] = move_to_numpy(eng.n_scale_out.take());
    r["n_move"] = move_to_numpy(eng.n_move.take());
    r["busy_pool_int"] = eng.busy_pool_int;
    r["loan_pool_int"] = eng.loan_pool_int;
    // the time series rows as columns: time (float64), then int64 each
    r["ts_t"] = move_to_numpy(std::move(eng.ts_t));
    r["ts_q"] = move_to_numpy(std::move(eng.ts_q));
    r["ts_busy"] = move_to_numpy(std::move(eng.ts_busy));
    r["ts_loaned"] = move_to_numpy(std::move(eng.ts_loaned));
    r["ts_running"] = move_to_numpy(std::move(eng.ts_running));
    r["ts_needed"] = move_to_numpy(std::move(eng.ts_needed));
    r["ev_time"] = drain_to_numpy(eng.ev_time);
    r["ev_job"] = drain_to_numpy(eng.ev_job);  // int32 (an index into the ids, -1: none)
    r["ev_what"] = drain_to_numpy(eng.ev_what);
    {
        // the workers as int32 in the first half of an int64 array: its other pages
        // are not touched (not resident) until widen_in_place widens it, with no
        // second array (the caller does that last, once the rest of the result is built)
        py::array_t<i64> w(static_cast<py::ssize_t>(eng.ev_workers.size()));
        eng.ev_workers.drain(reinterpret_cast<int32_t*>(w.mutable_data()));
        r["ev_workers"] = w;
    }
    r["n_pools"] = st.n_pools;
    py::list reqs;
    for (const auto& q : eng.ws.requests) reqs.append(request_dict(q));
    r["reclaim_requests"] = reqs;
    // the static job columns as given to new_engine (the caller may drop its own
    // copies for the run): arrival, sizes (int32), elastic, alpha, traced duration
    r["arrival_s"] = move_to_numpy(std::move(st.arrival_s));
    r["gpus_per_worker"] = move_to_numpy(st.gpus_per_worker.take());
    r["ref_workers"] = move_to_numpy(st.ref_workers.take());
    r["min_workers"] = move_to_numpy(st.min_workers.take());
    r["max_workers"] = move_to_numpy(st.max_workers.take());
    r["elastic"] = move_to_numpy(std::move(st.elastic));
    r["alpha"] = move_to_numpy(std::move(st.alpha));
    r["duration_s"] = move_to_numpy(std::move(eng.cfg.duration_s));
    eng.results_taken = true;
#if defined(__GLIBC__)
    // a large replay's freed blocks go back to the system before the result frames
    // are built (a small one's stay for the next replay: no page faults again)
    if (n_jobs >= 200000) malloc_trim(0);
#endif
    return r;
}

// Useful work per pool and each job's main pool (int32, -1: none) from the
// engine's per-job GPU-seconds by pool and done_work (float64 per job): the
// arithmetic of engine.py Engine.pool_split (metrics.py's per-job loop), on the
// engine's own accounting.  Once, after results(): the accounting is freed after.
py::tuple engine_pool_split(M::Engine& eng, const py::handle& done_work) {
    if (!eng.results_taken)
        throw py::value_error("pool_split: the results have not been taken");
    if (eng.pools_split) throw py::value_error("pool_split: the split was already taken");
    auto dw = col_view<double>(done_work);
    const auto n = static_cast<py::ssize_t>(eng.pool_acc.size());
    if (dw.shape(0) != n) throw py::value_error("pool_split: done_work must have one value a job");
    const double* w = dw.data();
    std::vector<double> useful(static_cast<size_t>(eng.st.n_pools), 0.0);
    py::array_t<int32_t> main_idx(n);
    int32_t* m = main_idx.mutable_data();
    std::vector<std::pair<i64, double>> d;
    for (py::ssize_t j = 0; j < n; ++j) {
        const M::Engine::PoolAcc& a = eng.pool_acc[static_cast<size_t>(j)];
        m[j] = -1;
        if (a.pool < 0) continue;
        if (a.more < 0) {  // one pool (the usual case): the loop below over one entry
            double tot = 0.0;
            tot += a.v;
            m[j] = a.pool;
            if (tot > 0) useful[static_cast<size_t>(a.pool)] += w[j] * (a.v / tot);
            continue;
        }
        eng.pools_of(static_cast<size_t>(j), d);
        double tot = 0.0;
        for (const auto& e : d) tot += e.second;  // (in order of first use, as Python's)
        // max(sorted(d), key=d.get): the first of the largest in ascending pool order.
        // d sorted in place: each pool has one entry, so its useful work gets one
        // addition from this job in any order.
        std::sort(d.begin(), d.end());
        i64 best = -1;
        double best_v = 0.0;
        for (const auto& e : d)
            if (best < 0 || e.second > best_v) {
                best = e.first;
                best_v = e.second;
            }
        m[j] = static_cast<int32_t>(best);
        if (tot > 0)
            for (const auto& e : d) useful[static_cast<size_t>(e.first)] += w[j] * (e.second / tot);
    }
    eng.release_pools();
    eng.pools_split = true;
    return py::make_tuple(useful, main_idx);
}

// Widen an int64 array whose first half holds int32 values (engine_results'
// ev_workers) in place: from the last value down, each int64 written over int32
// values already read.
void widen_in_place(py::array_t<i64, py::array::c_style> a) {
    if (a.ndim() != 1) throw py::value_error("widen_in_place: expected a 1-D int64 array");
    // (through bytes and memcpy: the two views alias, which the compiler must see)
    auto* b = reinterpret_cast<unsigned char*>(a.mutable_data());
    for (py::ssize_t i = a.shape(0); i-- > 0;) {
        int32_t v;
        std::memcpy(&v, b + 4 * i, sizeof v);
        const i64 w = v;
        std::memcpy(b + 8 * i, &w, sizeof w);
    }
}


// ------------------------------------------------- one pass on a ClusterState
// Fast readers of CPython lists (the state's columns).
struct PyCols {
    static double f(PyObject* lst, i64 j) {
        PyObject* o = PyList_GET_ITEM(lst, j);
        if (PyFloat_CheckExact(o)) return PyFloat_AS_DOUBLE(o);
        const double v = PyFloat_AsDouble(o);
        if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
        return v;
    }
    static i64 i(PyObject* lst, i64 j) {
        PyObject* o = PyList_GET_ITEM(lst, j);
        const long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
        return static_cast<i64>(v);
    }
    static bool b(PyObject* lst, i64 j) {
        const int v = PyObject_IsTrue(PyList_GET_ITEM(lst, j));
        if (v < 0) throw py::error_already_set();
        return v != 0;
    }
};

PyObject* list_attr(const py::handle& obj, const char* name, i64 n) {
    py::object a = obj.attr(name);
    if (!PyList_CheckExact(a.ptr()) || PyList_GET_SIZE(a.ptr()) != n)
        throw py::type_error(std::string("ClusterState.") + name + ": expected a list of length " +
                             std::to_string(n));
    return a.ptr();  // borrowed: the state keeps the list alive
}

// Read the dict-as-ordered-set `name` of the state into a vector of job indexes.
std::vector<i64> keys_of(const py::handle& obj, const char* name) {
    std::vector<i64> out;
    py::object d = obj.attr(name);
    if (!PyDict_Check(d.ptr())) throw py::type_error(std::string("ClusterState.") + name + ": expected a dict");
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    out.reserve(static_cast<size_t>(PyDict_Size(d.ptr())));
    while (PyDict_Next(d.ptr(), &pos, &k, &v)) {
        const long long x = PyLong_AsLongLong(k);
        if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
        out.push_back(static_cast<i64>(x));
    }
    return out;
}

py::list placement_list(const S::Placement& p) {
    py::list out;
    for (const auto& e : p) out.append(py::make_tuple(e.first, e.second));
    return out;
}

// The C++ side of one Python ClusterState, kept between aryl.schedule calls on
// it (ClusterState.native_cache): the static job columns (immutable once a job
// is added, like ClusterState.static_arrays) are read once; each call reads the
// dynamic fields of the queued and running jobs only and reuses the vectors.
// Valid for the state whose job_id list is `owner` (a copy has its own list).
struct StateCache {
    py::object owner;  // the state's job_id list
    i64 n_static = 0;  // jobs whose static fields are loaded
    S::State st;
    std::vector<i64> active;  // jobs loaded as queued or running by the last call
    bool had_families = false;  // the family column is set (else -1 everywhere)
};

// One pass of `policy` over the Python ClusterState `obj` (not modified).
// `prep`: the parts prepared in Python (config, speed model, family and type
// indexes).  Returns the plan as tuples (aryl/scheduling/native.py).
py::tuple schedule_state(const py::handle& obj, StateCache& cache, const py::dict& prep,
                         const py::dict& policy, py::object reclaim_fn) {
    py::object job_id = obj.attr("job_id");
    const i64 n = py::len(job_id);
    if (!cache.owner.is(job_id) || cache.n_static > n) {  // another state: start afresh
        cache.owner = job_id;
        cache.n_static = 0;
        cache.st = S::State();
        cache.active.clear();
    }
    S::State& st = cache.st;
    set_config(st.config, prep["config"].cast<py::dict>());
    set_speeds(st, prep["speeds"].cast<py::dict>());
    st.now_s = obj.attr("now_s").cast<double>();
    // servers (rebuilt each call; the vectors keep their capacity)
    const i64 ns = py::len(obj.attr("server_id"));
    PyObject* sg = list_attr(obj, "server_gpus", ns);
    PyObject* ss = list_attr(obj, "server_status", ns);
    PyObject* sr = list_attr(obj, "server_reclaimed_s", ns);
    PyObject* sp = list_attr(obj, "server_pool_idx", ns);
    const auto type = prep["server_type"].cast<std::vector<i64>>();
    const i64 n_train = py::len(obj.attr("training_servers"));
    st.server_type.clear();
    st.server_gpus.clear();
    st.server_status.clear();
    st.server_reclaimed_s.clear();
    st.server_pool_idx.clear();
    st.training_servers.clear();
    st.free.clear();
    st.ex_srv.clear();
    st.servers_by_type.clear();
    st.training_by_type.clear();
    st.gpu_types.clear();
    st.training_gpus = 0;
    st.n_loaned = st.loaned_gpus = 0;
    st.on_loan.clear();
    st.last_reclaim_s = -S::kInf;
    st.n_pools = py::len(obj.attr("pool_names"));
    st.busy_by_pool.assign(static_cast<size_t>(st.n_pools), 0);
    st.loaned_gpus_by_pool.assign(static_cast<size_t>(st.n_pools), 0);
    st.jobs_on.clear();  // add_server appends one per server
    for (i64 s = 0; s < ns; ++s)
        st.add_server(s < n_train, PyCols::i(sg, s), PyCols::i(sp, s), type[static_cast<size_t>(s)],
                      static_cast<int8_t>(PyCols::i(ss, s)), PyCols::f(sr, s));
    st.gpu_types = prep["gpu_types"].cast<std::vector<std::string>>();
    st.servers_needed = obj.attr("servers_needed").cast<i64>();
    st.reclaim_deadline_s = obj.attr("reclaim_deadline_s").cast<double>();
    st.reclaim_requests.clear();
    for (const auto& r : obj.attr("reclaim_requests").cast<py::list>()) {
        const py::tuple rt = r.cast<py::tuple>();
        st.reclaim_requests.emplace_back(rt[0].cast<double>(), rt[1].cast<i64>());
    }
    py::tuple memo = obj.attr("elastic_memo");
    st.memo_left = memo[0].cast<i64>();
    st.memo_loaned = memo[1].cast<i64>();
    // jobs: static fields of new jobs (once), dynamic fields of the active ones
    const auto fam = prep["family"].cast<std::vector<i64>>();  // per job (empty: none)
    if (cache.n_static < n) {
        PyObject* c_arr = list_attr(obj, "arrival_s", n);
        PyObject* c_gpw = list_attr(obj, "gpus_per_worker", n);
        PyObject* c_mn = list_attr(obj, "min_workers", n);
        PyObject* c_mx = list_attr(obj, "max_workers", n);
        PyObject* c_ref = list_attr(obj, "ref_workers", n);
        PyObject* c_el = list_attr(obj, "elastic", n);
        PyObject* c_al = list_attr(obj, "alpha", n);
        PyObject* c_rt = list_attr(obj, "ref_throughput", n);
        st.reserve_jobs(n);
        for (i64 j = cache.n_static; j < n; ++j) {
            const auto u = static_cast<size_t>(j);
            st.arrival_s[u] = PyCols::f(c_arr, j);
            st.gpus_per_worker.set(u, PyCols::i(c_gpw, j));
            st.min_workers.set(u, PyCols::i(c_mn, j));
            st.max_workers.set(u, PyCols::i(c_mx, j));
            st.ref_workers.set(u, PyCols::i(c_ref, j));
            st.elastic[u] = PyCols::b(c_el, j) ? 1 : 0;
            st.alpha[u] = PyCols::f(c_al, j);
            st.ref_throughput[u] = PyCols::f(c_rt, j);
        }
        cache.n_static = n;
    }
    if (!fam.empty() || cache.had_families) {
        for (i64 j = 0; j < n; ++j)
            st.family.set(static_cast<size_t>(j), fam.empty() ? -1 : fam[static_cast<size_t>(j)]);
        cache.had_families = !fam.empty();
    }
    // forget the last call's active jobs
    for (i64 j : cache.active) {
        const auto u = static_cast<size_t>(j);
        st.status[u] = S::PENDING;
        st.placement.clear(u);
        st.workers.set(u, 0);
        st.ex_job.clear(u);
    }
    cache.active.clear();
    st.queued.clear();
    st.running.clear();
    st.below.clear();
    st.elastic_running.clear();
    st.next_run_seq = 0;
    st.drop_queue_indexes();
    const std::vector<i64> queued = keys_of(obj, "queued");
    const std::vector<i64> running = keys_of(obj, "running");
    PyObject* c_rem = list_attr(obj, "remaining_s", n);
    PyObject* c_pa = list_attr(obj, "progress_at_s", n);
    PyObject* c_sp = list_attr(obj, "speed", n);
    PyObject* c_cr = list_attr(obj, "checkpoint_remaining_s", n);
    PyObject* c_nc = list_attr(obj, "next_checkpoint_s", n);
    PyObject* c_rs = list_attr(obj, "restarted", n);
    PyObject* c_qs = list_attr(obj, "queued_since_s", n);
    PyObject* c_ws = list_attr(obj, "waited_s", n);
    PyObject* c_ag = list_attr(obj, "attained_gpu_s", n);
    PyObject* c_aa = list_attr(obj, "attained_at_s", n);
    PyObject* c_pl = list_attr(obj, "placement", n);
    PyObject* c_wk = list_attr(obj, "workers", n);
    auto check = [n](i64 j) {
        if (j < 0 || j >= n) throw py::index_error("ClusterState: job index out of range");
    };
    // a queued job: what its queue keys and a start read
    for (i64 j : queued) {
        check(j);
        const auto u = static_cast<size_t>(j);
        st.remaining_s[u] = PyCols::f(c_rem, j);
        st.queued_since_s[u] = PyCols::f(c_qs, j);
        st.waited_s[u] = PyCols::f(c_ws, j);
        st.attained_gpu_s[u] = PyCols::f(c_ag, j);
        const uint8_t rs = PyCols::b(c_rs, j) ? 1 : 0;
        if (rs != st.restarted[u]) st.rec(j).restarted = rs;
        st.status[u] = S::QUEUED;
        st.queued.add(j);
        cache.active.push_back(j);
    }
    // a running job: progress, checkpoint, attained service, placement
    for (i64 j : running) {
        check(j);
        const auto u = static_cast<size_t>(j);
        st.remaining_s[u] = PyCols::f(c_rem, j);
        st.queued_since_s[u] = PyCols::f(c_qs, j);
        st.waited_s[u] = PyCols::f(c_ws, j);
        st.attained_gpu_s[u] = PyCols::f(c_ag, j);
        S::JobRecord& R = st.rec(j);
        R.progress_at_s = PyCols::f(c_pa, j);
        R.speed = PyCols::f(c_sp, j);
        R.checkpoint_remaining_s = PyCols::f(c_cr, j);
        R.next_checkpoint_s = PyCols::f(c_nc, j);
        R.attained_at_s = PyCols::f(c_aa, j);
        R.restarted = PyCols::b(c_rs, j) ? 1 : 0;
        st.status[u] = S::RUNNING;
        st.running.add(j);
        R.run_seq = st.next_run_seq++;
        cache.active.push_back(j);
        PyObject* pd = PyList_GET_ITEM(c_pl, j);
        if (!PyDict_Check(pd))
            throw aryl::sched::InvalidInput("jobs[" + std::to_string(j) + "]: running with no placement");
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        S::Placement& p = st.placement.mut(u);
        p.clear();
        while (PyDict_Next(pd, &pos, &k, &v)) {
            const long long srv = PyLong_AsLongLong(k);
            const long long kk = PyLong_AsLongLong(v);
            if ((srv == -1 || kk == -1) && PyErr_Occurred()) throw py::error_already_set();
            if (srv < 0 || srv >= ns) throw py::index_error("ClusterState: placement server out of range");
            p.emplace_back(static_cast<i64>(srv), static_cast<i64>(kk));
        }
        st.workers.set(u, PyCols::i(c_wk, j));
    }
    st.rebuild_indexes();
    st.last_reclaim_s = obj.attr("last_reclaim_s").cast<double>();
    // the Python state's orders of its ordered sets
    st.elastic_running.clear();
    for (i64 j : keys_of(obj, "elastic_running")) st.elastic_running.add(j);
    st.below.clear();
    for (i64 j : keys_of(obj, "below")) st.below.add(j);

    const S::Policy pol = make_policy(policy);
    const S::ReclaimHook hook = make_hook(std::move(reclaim_fn));
    S::PassWorkspace ws;
    S::Plan plan;
    S::schedule<S::NoObserver>(st, pol, plan, nullptr, hook, ws);

    py::list reclaim_actions, reclaimed, borrowed, preemptions, resizes, starts, returned;
    for (const auto& a : plan.reclaim_actions)
        reclaim_actions.append(py::make_tuple(a.job, a.preempt ? py::object(py::none())
                                                               : py::object(placement_list(a.place)),
                                              a.reason));
    for (i64 s : plan.reclaimed_servers) reclaimed.append(s);
    for (const auto& b : plan.borrowed_servers) borrowed.append(py::make_tuple(b.first, b.second));
    for (const auto& p : plan.preemptions) preemptions.append(py::make_tuple(p.first, p.second));
    for (const auto& r : plan.resizes)
        resizes.append(py::make_tuple(r.job, placement_list(r.place), r.reason));
    for (const auto& s : plan.starts)
        starts.append(py::make_tuple(s.job, placement_list(s.place), s.reason));
    for (const auto& r : plan.returned_servers) returned.append(py::make_tuple(r.first, r.second));
    return py::make_tuple(plan.now_s, reclaim_actions, reclaimed, plan.reclaim_shortfall, borrowed,
                          preemptions, resizes, starts, returned,
                          py::make_tuple(plan.memo_left, plan.memo_loaned), plan.n_extra_repairs,
                          plan.next_wakeup_s);
}

}  // namespace

PYBIND11_MODULE(_sched, m) {
    m.doc() = "Aryl scheduling pass and simulator engine (C++17; use aryl.schedule / aryl.sim).";
    m.def("_kernel_name", []() { return "sched"; });
    m.attr("ARYL_NATIVE") = S::ARYL_NATIVE;

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const S::InvalidInput& e) {
            py::object cls = py::module_::import("aryl.errors").attr("InvalidInputError");
            PyErr_SetString(cls.ptr(), e.what());
        } catch (const S::PolicyDecisionError& e) {
            py::object cls = py::module_::import("aryl.errors").attr("PolicyError");
            PyErr_SetString(cls.ptr(), e.what());
        } catch (const S::ZeroDivision& e) {
            PyErr_SetString(PyExc_ZeroDivisionError, e.what());
        } catch (const M::SimError& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        } catch (const M::InvariantFailure& e) {
            py::object cls = py::module_::import("aryl.sim.check").attr("InvariantError");
            PyErr_SetString(cls.ptr(), e.what());
        }
    });

    py::class_<M::Engine>(m, "Engine")
        .def("run", &engine_run, py::arg("max_iterations"),
             "Run up to max_iterations loop iterations (<= 0: to the end); True when ended.")
        .def("results", &engine_results,
             "The results, moved out (once, after the end): per-job columns (the static "
             "ones given to new_engine too), time series columns, event log")
        .def("pool_split", &engine_pool_split, py::arg("done_work"),
             "(useful work per pool, main pool per job as int32): once, after results()")
        .def_property_readonly("n_open", [](const M::Engine& e) { return e.n_open; })
        .def_property_readonly("now", [](const M::Engine& e) { return e.now; })
        .def_property_readonly("t0", [](const M::Engine& e) { return e.t0; })
        .def_property_readonly("n_iter", [](const M::Engine& e) { return e.n_iter; })
        .def_property_readonly("n_arrived", [](const M::Engine& e) { return e.n_arrived; })
        .def_property_readonly("n_infeasible", [](const M::Engine& e) { return e.n_infeasible; })
        .def_property_readonly("n_decisions", [](const M::Engine& e) { return e.n_decisions; })
        .def_property_readonly("sched_time_s", [](const M::Engine& e) { return e.sched_time_s; })
        .def_property_readonly("counters", [](const M::Engine& e) {
            py::dict d;
            d["busy_int"] = e.busy_int;
            d["busy_loaned_int"] = e.busy_loaned_int;
            d["loan_gpu_int"] = e.loan_gpu_int;
            d["cap_int"] = e.cap_int;
            d["loan_int"] = e.loan_int;
            d["serving_int"] = e.serving_int;
            d["n_loans"] = e.n_loans;
            d["n_loan_returns"] = e.n_loan_returns;
            d["n_reclaims"] = e.n_reclaims;
            d["n_reclaim_preempt"] = e.n_reclaim_preempt;
            d["reclaim_deadline_misses"] = e.reclaim_deadline_misses;
            return d;
        });
    bind_callback_pass(m);
#ifdef ARYL_SCHED_BIND_TESTING
    aryl::sched::aryl_pass::bind_testing(m);
#endif
    m.def("new_engine", &new_engine, py::arg("spec"));
    m.def("widen_in_place", &widen_in_place, py::arg("a"),
          "Widen an int64 array whose first half holds int32 values, in place.");
    py::class_<StateCache>(m, "StateCache", "Scratch of the compiled pass for one ClusterState.")
        .def(py::init<>());
    m.def("schedule_state", &schedule_state, py::arg("state"), py::arg("cache"), py::arg("prep"),
          py::arg("policy"), py::arg("reclaim_fn"));
}
