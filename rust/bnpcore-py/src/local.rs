//! Bindings of `bnpcore::local`: the fused local step of a mixture (responsibilities, summaries
//! and everything the moves need from them).

use bnpcore::local::{BatchRows, Carry, CsrIndices, CsrRows, Dest, LocalOptions, Prepared, Proposal};
use bnpcore::obs::Obs;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::alloc::PyAlloc;
use crate::obs::PyObs;
use crate::parallel::run;
use crate::topic::{extract_csr, Csr};

/// Borrow the CSR rows of a tuple `(indptr, indices, data, n_features)` (scipy's arrays) for the
/// duration of `f`.
pub(crate) fn with_csr<'py, R>(py: Python<'py>, t: &Bound<'py, PyTuple>, f: impl FnOnce(&CsrRows) -> PyResult<R>) -> PyResult<R> {
    if t.len() != 4 {
        return Err(PyTypeError::new_err("sparse `x` must be a tuple (indptr, indices, data, n_features)"));
    }
    let data: PyReadonlyArray1<f64> = t.get_item(2)?.extract()?;
    let n_cols: usize = t.get_item(3)?.extract()?;
    let data = data.as_slice().map_err(|_| PyTypeError::new_err("sparse `x`: data must be a contiguous float64 array"))?;
    let (ip, ix) = (t.get_item(0)?, t.get_item(1)?);
    let idx = extract_csr(&ip, &ix)?;
    let contiguous = |_| PyTypeError::new_err("sparse `x`: indptr and indices must be contiguous");
    let rows = match &idx {
        Csr::I32(p, i) => CsrRows::new(
            CsrIndices::I32(p.as_slice().map_err(contiguous)?),
            CsrIndices::I32(i.as_slice().map_err(contiguous)?),
            data,
            n_cols,
        ),
        Csr::I64(p, i) => CsrRows::new(
            CsrIndices::I64(p.as_slice().map_err(contiguous)?),
            CsrIndices::I64(i.as_slice().map_err(contiguous)?),
            data,
            n_cols,
        ),
    }
    .map_err(|e| crate::errors::to_py(py, e))?;
    f(&rows)
}

fn extract_proposals(obs: &Obs, py: Python<'_>, props: Option<&Bound<'_, PyList>>) -> PyResult<Vec<Proposal>> {
    let mut out = Vec::new();
    let Some(props) = props else { return Ok(out) };
    for item in props.iter() {
        let d = item.cast::<PyDict>().map_err(|_| PyTypeError::new_err("each proposal must be a dict"))?;
        let src: Vec<usize> = d.get_item("src")?.ok_or_else(|| PyKeyError::new_err("proposal needs `src`"))?.extract()?;
        let dest = if let Some(cols) = d.get_item("dest_cols")? {
            Dest::Columns(cols.extract()?)
        } else {
            let fn_: PyReadonlyArray1<f64> =
                d.get_item("fresh_N")?.ok_or_else(|| PyKeyError::new_err("proposal needs `dest_cols` or `fresh_N`"))?.extract()?;
            let fs: PyReadonlyArray2<f64> =
                d.get_item("fresh_S")?.ok_or_else(|| PyKeyError::new_err("proposal needs `fresh_S`"))?.extract()?;
            let fe: PyReadonlyArray1<f64> =
                d.get_item("fresh_e_log_pi")?.ok_or_else(|| PyKeyError::new_err("proposal needs `fresh_e_log_pi`"))?.extract()?;
            let (fn_, fs) = (fn_.as_array(), fs.as_array());
            let table = run(py, None, || obs.e_log_lik_table(fn_, fs))?;
            Dest::Fresh { table, e_log_pi: fe.as_array().to_owned() }
        };
        // a delete: only the rows of `anchor` are re-spread, destination j continuing carry[j]
        let carry = match (d.get_item("anchor")?, d.get_item("carry")?) {
            (None, None) => None,
            (Some(a), Some(c)) => Some(Carry { anchor: a.extract()?, cols: c.extract()? }),
            _ => return Err(PyKeyError::new_err("a proposal's `anchor` and `carry` go together")),
        };
        out.push(Proposal { src, dest, carry });
    }
    Ok(out)
}

/// Fused local step + summaries of one batch, with the log weights `E[ln π]` computed from
/// `alloc` and the counts `n_post`. Returns a dict with `N`, `S`, `H`, `h_sum`,
/// `lse_sum`, `pair_H`, `proposals` (list of (N, S, H)), and optionally `resp`, `cols` (the
/// responsibility columns `collect_cols`, N × m), `cooccur`, `co_pairs` (with `cooccur_pairs`
/// and L-sparse rows: int64 P × 2, the pairs a < b some row holds together, sorted).
/// With `top_l` (L-sparse responsibilities) and `return_resp`, `resp_idx` (uint32, N × min(L, K),
/// padded with 2**32-1) and `resp_val` (float64, same shape) replace `resp`; `n_candidates` (int)
/// is present when the L-sparse candidates came from the single-precision GEMM (zero-mean
/// Gaussian, large K): the number of (row, cluster) log weights recomputed in float64.
///
/// `x` is a float64 2-D array, or a tuple `(indptr, indices, data, n_features)` of CSR rows
/// (scipy's arrays, borrowed; `mult` and `bern` only), whose step costs O(nnz · K).
/// ``prepared``: the result of [`prepare_local`] for the same `obs`, `alloc`, `n_post` and
/// `s_post` (computed once for steps that share the global parameters; the result is the same,
/// bit for bit).
#[pyfunction]
#[pyo3(signature = (obs, alloc, x, n_post, s_post, *, weights = None, merge_pairs = None, proposals = None,
                    collect_cols = None, cooccur_col = None, cooccur_pairs = false, return_resp = false, top_l = None,
                    n_threads = None, prepared = None))]
pub(crate) fn local_step<'py>(
    py: Python<'py>,
    obs: &PyObs,
    alloc: &PyAlloc,
    x: &Bound<'py, PyAny>,
    n_post: PyReadonlyArray1<'py, f64>,
    s_post: PyReadonlyArray2<'py, f64>,
    weights: Option<PyReadonlyArray1<'py, f64>>,
    merge_pairs: Option<Vec<(usize, usize)>>,
    proposals: Option<Bound<'py, PyList>>,
    collect_cols: Option<Vec<usize>>,
    cooccur_col: Option<usize>,
    cooccur_pairs: bool,
    return_resp: bool,
    top_l: Option<usize>,
    n_threads: Option<usize>,
    prepared: Option<PyRef<'py, PyPrepared>>,
) -> PyResult<Bound<'py, PyDict>> {
    if let Some(p) = &prepared {
        if !std::ptr::eq(p.obs.get(), obs) || !std::ptr::eq(p.alloc.get(), alloc) || p.inner.n_clusters() != n_post.len()? {
            return Err(crate::errors::to_py(
                py,
                bnpcore::Error::param("prepared", "prepared for another observation model, allocation model or number of clusters"),
            ));
        }
    }
    let props = extract_proposals(&obs.inner, py, proposals.as_ref())?;
    let w = weights.as_ref().map(|w| w.as_array());
    let opts = LocalOptions {
        weights: w,
        merge_pairs: merge_pairs.unwrap_or_default(),
        proposals: props,
        collect_cols: collect_cols.unwrap_or_default(),
        cooccur_col,
        cooccur_pairs,
        return_resp,
        top_l,
    };
    let (n, s) = (n_post.as_array(), s_post.as_array());
    let prep: Option<&Prepared> = prepared.as_ref().map(|p| &p.inner);
    let step = |data: BatchRows| match prep {
        Some(p) => obs.inner.local_step_prepared(data, p, &opts),
        None => obs.inner.local_step_rows(data, n, s, &alloc.inner, &opts),
    };
    let out = if let Ok(t) = x.cast::<PyTuple>() {
        with_csr(py, t, |rows| run(py, n_threads, || step(BatchRows::Csr(rows))))?
    } else {
        let x: PyReadonlyArray2<f64> = x.extract()?;
        let x = x.as_array();
        run(py, n_threads, || step(BatchRows::Dense(x)))?
    };
    let d = PyDict::new(py);
    d.set_item("N", out.n.into_pyarray(py))?;
    d.set_item("S", out.s.into_pyarray(py))?;
    d.set_item("H", out.h.into_pyarray(py))?;
    d.set_item("h_sum", out.h_sum)?;
    d.set_item("lse_sum", out.lse_sum)?;
    let moves = out.moves;
    d.set_item("pair_H", moves.pair_h.into_pyarray(py))?;
    let props = PyList::empty(py);
    for p in moves.proposals {
        props.append((p.n.into_pyarray(py), p.s.into_pyarray(py), p.h.into_pyarray(py)))?;
    }
    d.set_item("proposals", props)?;
    if let Some(r) = out.resp {
        d.set_item("resp", r.into_pyarray(py))?;
    }
    if let Some(r) = out.resp_idx {
        d.set_item("resp_idx", r.into_pyarray(py))?;
    }
    if let Some(r) = out.resp_val {
        d.set_item("resp_val", r.into_pyarray(py))?;
    }
    if let Some(c) = moves.cols {
        d.set_item("cols", c.into_pyarray(py))?;
    }
    if let Some(c) = moves.cooccur {
        d.set_item("cooccur", c.into_pyarray(py))?;
    }
    if let Some(pairs) = moves.co_pairs {
        let flat: Vec<i64> = pairs.iter().flat_map(|&(a, b)| [i64::from(a), i64::from(b)]).collect();
        let arr = ndarray::Array2::from_shape_vec((pairs.len(), 2), flat).expect("pairs × 2");
        d.set_item("co_pairs", arr.into_pyarray(py))?;
    }
    if let Some(c) = out.n_candidates {
        d.set_item("n_candidates", c)?;
    }
    Ok(d)
}

/// Global parameters prepared for local steps ([`prepare_local`]).
#[pyclass(name = "PreparedGlobals", frozen, module = "bnpcore._core")]
pub(crate) struct PyPrepared {
    inner: Prepared,
    obs: Py<PyObs>,
    alloc: Py<PyAlloc>,
}

/// The table of `E[log F]` and the allocation's log weights for the posterior of `(n_post,
/// s_post)`: what every local step computes before it looks at a row. Pass it as
/// `local_step(..., prepared=)` with the same `obs`, `alloc` and summaries.
#[pyfunction]
#[pyo3(signature = (obs, alloc, n_post, s_post))]
pub(crate) fn prepare_local<'py>(
    py: Python<'py>,
    obs: Bound<'py, PyObs>,
    alloc: Bound<'py, PyAlloc>,
    n_post: PyReadonlyArray1<'py, f64>,
    s_post: PyReadonlyArray2<'py, f64>,
) -> PyResult<PyPrepared> {
    let (n, s) = (n_post.as_array(), s_post.as_array());
    let (o, a) = (&obs.get().inner, &alloc.get().inner);
    let inner = run(py, None, || o.prepare_local(n, s, a))?;
    Ok(PyPrepared { inner, obs: obs.unbind(), alloc: alloc.unbind() })
}
