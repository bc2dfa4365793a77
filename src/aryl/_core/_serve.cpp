// pybind11 binding of the request queue (algorithm in serve.hpp, no Python there).
//
// Private: call aryl.sim.serving.replay_requests(), which validates the inputs
// first.  The arrays are converted to C-contiguous arrays (forcecast), the
// queue runs with the GIL released, and the start times come back as a new
// numpy array.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>

#include "serve.hpp"

namespace py = pybind11;
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

namespace {

py::array_t<double> fcfs_starts(const F64& arrival, const F64& service, const F64& cap_t,
                                const I64& cap_v) {
    if (arrival.ndim() != 1 || service.ndim() != 1 || cap_t.ndim() != 1 || cap_v.ndim() != 1)
        throw py::value_error("fcfs_starts: arrays must be 1-D");
    const py::ssize_t n = arrival.shape(0);
    const py::ssize_t m = cap_t.shape(0);
    if (service.shape(0) != n)
        throw py::value_error("fcfs_starts: service must have the length of arrival");
    if (cap_v.shape(0) != m || m < 1)
        throw py::value_error("fcfs_starts: cap_t and cap_v must have one equal length >= 1");
    py::array_t<double> out(n);
    const double* a = arrival.data();
    const double* s = service.data();
    const double* ct = cap_t.data();
    const int64_t* cv = cap_v.data();
    double* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        aryl::serve::fcfs_starts(n, a, s, m, ct, cv, o);
    }
    return out;
}

}  // namespace

PYBIND11_MODULE(_serve, mod) {
    mod.doc() = "Compiled FCFS request queue on a varying GPU count (see serve.hpp).";
    mod.def("fcfs_starts", &fcfs_starts, py::arg("arrival"), py::arg("service"),
            py::arg("cap_t"), py::arg("cap_v"));
}
