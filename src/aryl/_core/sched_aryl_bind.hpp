// Test-only pybind11 hooks of sched_aryl.hpp's building blocks (the table builders,
// the solver glue, slot caps and the extra placement), so that the differential tests
// can compare each one with its Python twin in aryl/scheduling/{aryl,kernels}.py.
//
// Called by the extension module (aryl._core._sched) as
// ``aryl::sched::aryl_pass::bind_testing(m)``; every name starts with ``_aryl_``.
// Placements cross as lists of (server, workers) pairs in insertion order.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "sched_aryl.hpp"

namespace aryl {
namespace sched {
namespace aryl_pass {
namespace bind_detail {

namespace py = pybind11;
using F64 = py::array_t<double, py::array::c_style | py::array::forcecast>;
using I64 = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

template <typename T, typename A>
std::vector<T> vec(const A& a) {
  if (a.ndim() != 1) throw py::value_error("expected a 1-D array");
  return std::vector<T>(a.data(), a.data() + a.shape(0));
}

inline py::tuple table_out(const Table& t) {
  py::array_t<double> v({t.n, t.K});
  py::array_t<int64_t> w({t.n, t.K});
  if (!t.v.empty()) std::memcpy(v.mutable_data(), t.v.data(), t.v.size() * sizeof(double));
  if (!t.w.empty()) std::memcpy(w.mutable_data(), t.w.data(), t.w.size() * sizeof(int64_t));
  return py::make_tuple(v, w);
}

inline Table table_in(const F64& values, const I64& weights) {
  if (values.ndim() != 2 || weights.ndim() != 2 || values.shape(0) != weights.shape(0) ||
      values.shape(1) != weights.shape(1))
    throw py::value_error("values and weights: 2-D arrays of one shape");
  Table t;
  t.n = values.shape(0);
  t.K = values.shape(1);
  t.v.assign(values.data(), values.data() + t.n * t.K);
  t.w.assign(weights.data(), weights.data() + t.n * t.K);
  return t;
}

inline py::list placement_out(const Placement& p) {
  py::list out;
  for (const auto& e : p) out.append(py::make_tuple(e.first, e.second));
  return out;
}

struct PlaceArgs {
  std::vector<int64_t> cand, ext, g;
  std::vector<Placement> old_store;
  std::vector<const Placement*> old;
  std::vector<std::vector<int64_t>> groups_store;
  Groups groups_extra;
  std::vector<int64_t> free_wo;
  bool has_free_wo = false;
  ExtrasInput in;

  PlaceArgs(const std::vector<int64_t>& cand_, const py::dict& extras_now,
            const std::vector<int64_t>& ext_, const std::vector<int64_t>& g_, int64_t n_run,
            const std::vector<std::vector<int64_t>>& groups,
            const std::optional<std::vector<int64_t>>& free_wo_extras)
      : cand(cand_), ext(ext_), g(g_), groups_store(groups) {
    for (const auto& grp : groups_store) groups_extra.emplace_back(grp);
    old_store.resize(cand.size());
    old.assign(cand.size(), nullptr);
    for (size_t i = 0; i < cand.size(); ++i) {
      py::int_ key(cand[i]);
      if (extras_now.contains(key)) {
        for (auto item : extras_now[key].cast<py::dict>())
          old_store[i].emplace_back(item.first.cast<int64_t>(), item.second.cast<int64_t>());
        old[i] = &old_store[i];
      }
    }
    if (free_wo_extras) {
      free_wo = *free_wo_extras;
      has_free_wo = true;
    }
    in.cand = &cand;
    in.old = &old;
    in.ext = &ext;
    in.g = &g;
    in.n_run = n_run;
    in.groups_extra = &groups_extra;
    in.free_wo_extras = has_free_wo ? &free_wo : nullptr;
  }
};

// Python's (new_extra, touched, short) of its keep pass (`keep`: no free_wo_extras, or
// one with short_pos, which stands for keep), else of keep_exact.  The keep pass
// leaves out the running jobs that keep exactly their extras (Placed); Python lists
// them in touched with an entry equal to their extras walked backwards (keep's
// order): they are the running positions given extras (k > 0) not in touched.
inline py::tuple placed_out(const Placed& p, const PlaceArgs& a, const std::vector<int64_t>& k,
                            bool keep) {
  const std::vector<int64_t>& cand = a.cand;
  std::vector<Placement> entries(p.new_extra.begin(), p.new_extra.begin() + cand.size());
  std::vector<int64_t> touched = p.touched;
  if (keep) {
    touched.clear();
    size_t q = 0;
    for (size_t i = 0; i < static_cast<size_t>(a.in.n_run); ++i) {
      const bool listed = q < p.touched.size() && p.touched[q] == static_cast<int64_t>(i);
      if (listed) ++q;
      if (!listed && k[i] > 0) {
        if (a.old[i] == nullptr || !entries[i].empty())
          throw std::logic_error("placed_out: a job left out of touched does not keep its extras");
        entries[i].assign(a.old[i]->rbegin(), a.old[i]->rend());
      }
      if (listed || k[i] > 0) touched.push_back(static_cast<int64_t>(i));
    }
    if (q != p.touched.size()) throw std::logic_error("placed_out: touched not ascending");
  }
  py::dict new_extra;  // job -> [(server, workers)], only the non-empty ones
  for (size_t i = 0; i < cand.size(); ++i)
    if (!entries[i].empty()) new_extra[py::int_(cand[i])] = placement_out(entries[i]);
  py::list shorts;
  for (const auto& e : p.shorts) shorts.append(py::make_tuple(e.first, e.second));
  return py::make_tuple(new_extra, touched, shorts);
}

}  // namespace bind_detail

inline void bind_testing(pybind11::module_& m) {
  namespace py = pybind11;
  using bind_detail::F64;
  using bind_detail::I64;
  using bind_detail::vec;
  m.def(
      "_aryl_extras_table",
      [](const F64& rem, const I64& cur, const I64& base, const I64& mx, const I64& g,
         const F64& alpha, const F64& pause) {
        Table t;
        std::vector<int64_t> extra;
        extras_table(vec<double>(rem), vec<int64_t>(cur), vec<int64_t>(base), vec<int64_t>(mx),
                     vec<int64_t>(g), vec<double>(alpha), vec<double>(pause), t, extra);
        return bind_detail::table_out(t);
      },
      "kernels.extras_table in C++ (test hook).");
  m.def(
      "_aryl_extras_table_from_throughput",
      [](const F64& rem, const I64& cur, const I64& base, const I64& mx, const I64& g,
         const F64& tput, const F64& pause) {
        if (tput.ndim() != 2) throw py::value_error("tput: 2-D");
        Table t;
        std::vector<int64_t> extra;
        std::vector<RowIn> rows;
        std::vector<double> tp(tput.data(), tput.data() + tput.shape(0) * tput.shape(1));
        extras_table_from_throughput(vec<double>(rem), vec<int64_t>(cur), vec<int64_t>(base),
                                     vec<int64_t>(mx), vec<int64_t>(g), tp, tput.shape(1) - 1,
                                     vec<double>(pause), t, extra, rows);
        return bind_detail::table_out(t);
      },
      "kernels.extras_table_from_throughput in C++ (test hook).");
  m.def(
      "_aryl_fed_solve_extras",
      [](const F64& rem, const I64& cur, const I64& base, const I64& mx, const I64& g,
         const F64& tput, const F64& pause, int64_t capacity, int64_t rounds) {
        // the table built `rounds` times feeding the MCKP step shortcut (the first
        // round teaches it the grid), each solved; then the table written
        if (tput.ndim() != 2) throw py::value_error("tput: 2-D");
        Table t;
        std::vector<int64_t> extra, out;
        std::vector<RowIn> rows;
        std::vector<double> cut;
        std::vector<double> tp(tput.data(), tput.data() + tput.shape(0) * tput.shape(1));
        py::list choices;
        for (int64_t r = 0; r < rounds; ++r) {
          extras_table_from_throughput(vec<double>(rem), vec<int64_t>(cur), vec<int64_t>(base),
                                       vec<int64_t>(mx), vec<int64_t>(g), tp, tput.shape(1) - 1,
                                       vec<double>(pause), t, extra, rows, capacity);
          solve_extras(t, capacity, Solver::mckp, false, nullptr, out, cut);
          choices.append(out);
        }
        write_pending(t);
        return py::make_tuple(choices, bind_detail::table_out(t));
      },
      "build_table fed with the capacity then kernels.solve_extras, `rounds` times, in "
      "C++ (test hook): ([extra workers per round], (values, weights)).");
  m.def(
      "_aryl_solve_extras",
      [](const F64& values, const I64& weights, int64_t capacity, const std::string& solver,
         bool unconstrained_only, std::optional<I64> max_extra) -> py::object {
        Table t = bind_detail::table_in(values, weights);
        std::vector<int64_t> caps, out;
        std::vector<double> cut;
        if (max_extra) caps = vec<int64_t>(*max_extra);
        const Solver s = solver == "greedy" ? Solver::greedy : Solver::mckp;
        if (!solve_extras(t, capacity, s, unconstrained_only, max_extra ? &caps : nullptr, out,
                          cut))
          return py::none();
        py::array_t<int64_t> a(static_cast<py::ssize_t>(out.size()));
        if (!out.empty()) std::memcpy(a.mutable_data(), out.data(), out.size() * sizeof(int64_t));
        return a;
      },
      "kernels.solve_extras in C++ (test hook).");
  m.def(
      "_aryl_slot_caps",
      [](const std::vector<int64_t>& free, const std::vector<int64_t>& g,
         const std::vector<int64_t>& max_extra) {
        std::vector<int64_t> caps;
        slot_caps(free, g, max_extra, caps);
        return caps;
      },
      "ArylPass.slot_caps in C++ (test hook).");
  m.def(
      "_aryl_bf_place",
      [](std::vector<int64_t> free, const std::vector<std::vector<int64_t>>& groups,
         int64_t workers, int64_t g, int64_t slots) -> py::object {
        Groups spans;
        for (const auto& grp : groups) spans.emplace_back(grp);
        Placement out{{-7, -7}};  // what was there does not matter
        const bool ok = bf_place(free, spans, workers, g, out, slots);
        return py::make_tuple(ok ? py::cast(out) : py::none(), free);
      },
      "sched_place.hpp bf_place in C++ (test hook): (placement or None, free after).");
  m.def(
      "_aryl_resize_placement",
      [](const Placement& place, int64_t base, const Placement& ex) {
        Placement out{{-7, -7}, {-8, -8}};  // what was there does not matter
        const int64_t workers = resize_placement(place, base, ex, out);
        return py::make_tuple(out, workers);
      },
      "elastic_phase's resize placement in C++ (test hook): (newp, workers).");
  m.def(
      "_aryl_place_extras",
      [](std::vector<int64_t> free, std::optional<std::vector<int64_t>> free_wo_extras,
         const std::vector<int64_t>& cand, const py::dict& extras_now,
         const std::vector<int64_t>& k, const std::vector<int64_t>& ext,
         const std::vector<int64_t>& g, int64_t n_run,
         const std::vector<std::vector<int64_t>>& groups_extra,
         std::optional<std::vector<int64_t>> extras_bound,
         std::optional<std::vector<int64_t>> short_pos) {
        bind_detail::PlaceArgs a(cand, extras_now, ext, g, n_run, groups_extra, free_wo_extras);
        if (extras_bound) a.in.extras_bound = &*extras_bound;
        if (short_pos) a.in.short_pos = &*short_pos;
        Placed placed;
        PlaceScratch sc;
        place_extras(free, a.in, k, placed, sc);
        return py::make_tuple(
            free, bind_detail::placed_out(placed, a, k, !a.has_free_wo || short_pos.has_value()));
      },
      py::arg("free"), py::arg("free_wo_extras"), py::arg("cand"), py::arg("extras_now"),
      py::arg("k"), py::arg("ext"), py::arg("g"), py::arg("n_run"), py::arg("groups_extra"),
      py::arg("extras_bound") = py::none(), py::arg("short_pos") = py::none(),
      "ArylPass.place_extras in C++ (test hook): (free after, (new_extra, touched, short)); "
      "extras_bound: ExtrasInput::extras_bound (per server, >= the GPUs of the extras "
      "there); short_pos: ExtrasInput::short_pos (with free_wo_extras, standing for keep).");
  m.def(
      "_aryl_fill_extras",
      [](const F64& values, const I64& weights, std::vector<int64_t> k,
         const std::vector<int64_t>& max_extra, std::vector<int64_t> free,
         std::optional<std::vector<int64_t>> free_wo_extras, const std::vector<int64_t>& cand,
         const py::dict& extras_now, const std::vector<int64_t>& ext,
         const std::vector<int64_t>& g, int64_t n_run,
         const std::vector<std::vector<int64_t>>& groups_extra) {
        // as elastic_phase: free0 = free, first placement of k, then the fill
        Table t = bind_detail::table_in(values, weights);
        bind_detail::PlaceArgs a(cand, extras_now, ext, g, n_run, groups_extra, free_wo_extras);
        PlaceScratch sc;
        std::vector<int64_t> free0(free);
        Placed placed;
        place_extras(free, a.in, k, placed, sc);
        fill_extras(t, k, max_extra, a.g, free, free0, placed,
                    [&](const std::vector<int64_t>& kv, Placed& res) {
                      place_extras(free, a.in, kv, res, sc);
                    });
        return py::make_tuple(k, free, bind_detail::placed_out(placed, a, k, !a.has_free_wo));
      },
      "place_extras then ArylPass.fill_extras in C++ (test hook): (k, free, placed).");
}

}  // namespace aryl_pass
}  // namespace sched
}  // namespace aryl
