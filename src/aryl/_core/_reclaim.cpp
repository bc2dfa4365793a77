// pybind11 binding of the reclaim greedy (algorithm in reclaim.hpp, no Python there).
//
// Private: call aryl.reclaiming.reclaim(), which validates the request first.
// The arrays are converted to C-contiguous int64 (forcecast), the greedy runs
// with the GIL released, and the results come back as new numpy arrays.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>
#include <vector>

#include "reclaim.hpp"

namespace py = pybind11;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

namespace {

template <typename T>
py::array_t<T> to_numpy(const std::vector<T>& v) {
    py::array_t<T> a(static_cast<py::ssize_t>(v.size()));
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

const int64_t* checked(const I64& a, py::ssize_t n, const char* name) {
    if (a.ndim() != 1 || a.shape(0) != n)
        throw py::value_error(std::string(name) + ": expected a 1-D array of length " +
                              std::to_string(n));
    return a.data();
}

py::tuple reclaim_greedy(const I64& server_id, const I64& server_gpus, const I64& server_allowed,
                         const I64& placement_job, const I64& placement_server,
                         const I64& placement_workers, const I64& job_workers,
                         const I64& job_gpus_per_worker, const I64& job_min_workers,
                         const I64& job_elastic, const I64& job_preemptible, int64_t n_return) {
    aryl::reclaim::Input in;
    const py::ssize_t m = server_id.ndim() == 1 ? server_id.shape(0) : -1;
    const py::ssize_t p = placement_job.ndim() == 1 ? placement_job.shape(0) : -1;
    const py::ssize_t J = job_workers.ndim() == 1 ? job_workers.shape(0) : -1;
    if (m < 0 || p < 0 || J < 0) throw py::value_error("reclaim_greedy: arrays must be 1-D");
    if (n_return < 0) throw py::value_error("n_return: must be >= 0");
    in.n_servers = m;
    in.server_id = checked(server_id, m, "server_id");
    in.server_gpus = checked(server_gpus, m, "server_gpus");
    in.server_allowed = checked(server_allowed, m, "server_allowed");
    in.n_placements = p;
    in.placement_job = checked(placement_job, p, "placement_job");
    in.placement_server = checked(placement_server, p, "placement_server");
    in.placement_workers = checked(placement_workers, p, "placement_workers");
    in.n_jobs = J;
    in.job_workers = checked(job_workers, J, "job_workers");
    in.job_gpus_per_worker = checked(job_gpus_per_worker, J, "job_gpus_per_worker");
    in.job_min_workers = checked(job_min_workers, J, "job_min_workers");
    in.job_elastic = checked(job_elastic, J, "job_elastic");
    in.job_preemptible = checked(job_preemptible, J, "job_preemptible");
    in.n_return = n_return;
    // Index ranges are the one thing that would make the kernel read out of bounds.
    for (py::ssize_t q = 0; q < p; ++q) {
        if (in.placement_job[q] < 0 || in.placement_job[q] >= J)
            throw py::index_error("placement_job: index out of range");
        if (in.placement_server[q] < 0 || in.placement_server[q] >= m)
            throw py::index_error("placement_server: index out of range");
    }

    aryl::reclaim::Output out;
    {
        py::gil_scoped_release release;
        out = aryl::reclaim::greedy(in);
    }
    return py::make_tuple(to_numpy(out.taken), to_numpy(out.cost), to_numpy(out.act_server),
                          to_numpy(out.act_job), to_numpy(out.act_kind),
                          to_numpy(out.act_workers), to_numpy(out.act_reason),
                          to_numpy(out.preempted), to_numpy(out.scaled),
                          to_numpy(out.scaled_new_workers), out.shortfall);
}

}  // namespace

PYBIND11_MODULE(_reclaim, m) {
    m.doc() = "Aryl reclaim greedy (C++17 kernel; use aryl.reclaiming.reclaim).";
    m.def("_kernel_name", []() { return "reclaim"; });
    m.def("reclaim_greedy", &reclaim_greedy, py::arg("server_id"), py::arg("server_gpus"),
          py::arg("server_allowed"), py::arg("placement_job"), py::arg("placement_server"),
          py::arg("placement_workers"), py::arg("job_workers"), py::arg("job_gpus_per_worker"),
          py::arg("job_min_workers"), py::arg("job_elastic"), py::arg("job_preemptible"),
          py::arg("n_return"),
          "Cost greedy over validated index arrays; see aryl/_core/reclaim.hpp.\n\n"
          "Returns (taken, cost, act_server, act_job, act_kind, act_workers, act_reason,\n"
          "preempted, scaled, scaled_new_workers, shortfall); indices, not ids.");
}
