//! Deterministic parallel map-reduce over row chunks.
//!
//! Rows `0..n` are split by a **fixed binary tree** whose leaves are chunks of at most
//! [`CHUNK_ROWS`] rows (split points depend only on `n`, never on the number of threads). Leaves
//! are mapped in parallel with `rayon::join`, and partial results are combined left-to-right at
//! every internal node. Floating-point results are therefore bit-identical for 1 or 64 threads,
//! and at most O(depth × threads) partial results are alive at once.

/// Rows per leaf of the reduction tree.
pub const CHUNK_ROWS: usize = 512;

/// Rows per tile inside a leaf of the local step (features and log weights of one tile are kept
/// in scratch buffers that are reused from tile to tile).
pub const TILE_ROWS: usize = 512;

/// Budget of a tile's feature rows (`f64`), so that a tile of wide features (a full covariance in
/// 128 dimensions has 8,385 vech features per row) stays in cache while its two GEMMs read it.
pub const TILE_BYTES: usize = 4 << 20;

/// Rows per tile for `f` features per row: [`TILE_ROWS`], halved while the tile's features exceed
/// [`TILE_BYTES`], at least 16 (a power of two dividing every leaf). Depends on the model and the
/// data's width only, never on the thread count.
pub fn tile_rows(f: usize) -> usize {
    let mut t = TILE_ROWS;
    while t > 16 && t * f * std::mem::size_of::<f64>() > TILE_BYTES {
        t /= 2;
    }
    t
}

/// Rows per leaf of the local step's reduction tree for a batch of `n` rows: about 32 leaves,
/// between 512 and 8192 rows, a multiple of [`TILE_ROWS`]. Depends on `n` only (never on the
/// thread count), so results stay bit-identical for any number of threads; large leaves
/// amortise the per-leaf `K × F` summary accumulators.
pub fn leaf_rows(n: usize) -> usize {
    let target = n.div_ceil(32).div_ceil(TILE_ROWS) * TILE_ROWS;
    target.clamp(2 * TILE_ROWS, 32 * TILE_ROWS)
}

/// Map every leaf range `[start, end)` with `leaf` and combine the results with `combine(left,
/// right)` in index order. Returns `None` for `n == 0`.
pub fn tree_reduce<T, L, C>(n: usize, chunk: usize, leaf: &L, combine: &C) -> Option<T>
where
    T: Send,
    L: Fn(usize, usize) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    if n == 0 {
        return None;
    }
    let n_chunks = n.div_ceil(chunk);
    Some(rec(0, n_chunks, n, chunk, leaf, combine))
}

fn rec<T, L, C>(c0: usize, c1: usize, n: usize, chunk: usize, leaf: &L, combine: &C) -> T
where
    T: Send,
    L: Fn(usize, usize) -> T + Sync,
    C: Fn(T, T) -> T + Sync,
{
    if c1 - c0 == 1 {
        let start = c0 * chunk;
        let end = (start + chunk).min(n);
        return leaf(start, end);
    }
    let mid = c0 + (c1 - c0) / 2;
    let (a, b) = rayon::join(|| rec(c0, mid, n, chunk, leaf, combine), || rec(mid, c1, n, chunk, leaf, combine));
    combine(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_result_for_any_pool_size() {
        let v: Vec<f64> = (0..10_007).map(|i| ((i as f64) * 0.37).sin() * 1e-3 + 1e3).collect();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| tree_reduce(v.len(), 64, &|a, b| v[a..b].iter().sum::<f64>(), &|x, y| x + y).unwrap())
        };
        let one = run(1);
        assert_eq!(one.to_bits(), run(2).to_bits());
        assert_eq!(one.to_bits(), run(7).to_bits());
    }
}
