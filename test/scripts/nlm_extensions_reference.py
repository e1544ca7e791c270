"""An independent reference for the filter's opt-in extensions (doc/numerical-contract.md, section 6),
written from the formulas with NumPy in long double (np.longdouble): fast-mode non-local means with
the Rician noise model, a noise map and a mask, by direct sums (no integral images, nothing shared
with the library). It tells the filter's float64 rounding apart from a wrong formula: the two agree
to about 1e-12 for unit-range data, and any error in a formula shows as a difference of the size of
the noise.

Arrays are in NumPy order with the channels on the last axis; NumPy's last spatial axis is ITK's
axis 0 (the contract's col axis).
"""

import itertools

import numpy as np

#: scikit-image's Schraudolph constants and the fast mode's distance cutoff.
EXP_A = np.longdouble("1512775.3951951856938")
EXP_BC = 1072632447
CUTOFF = 5


def _fast_exp(y):
    """scikit-image's fast exponential fe(y) for y in [-5, 0]: the double whose high 32 bits are
    trunc(EXP_A * y) + EXP_BC and whose low 32 bits are 0 (as long doubles)."""
    high = np.trunc(EXP_A * y).astype(np.int64) + EXP_BC
    return (high.astype(np.uint64) << np.uint64(32)).view(np.float64).astype(np.longdouble)


def _weights(raw, norm, alpha):
    """alpha * fe(-dist) with dist = max(raw, 0) / norm, 0 beyond the cutoff."""
    dist = np.maximum(raw, 0) / norm
    safe = np.minimum(dist, CUTOFF)
    return np.where(dist > CUTOFF, 0, alpha * _fast_exp(-safe))


def nl_means_reference(image, patch_size, patch_distance, h, sigma=0.0, *, rician=False, mask=None):
    """Fast-mode non-local means of `image` (spatial axes, then one channel axis) in long double.
    `patch_size` and `patch_distance` are numbers or tuples (one per spatial axis, NumPy's order).

    `sigma` is a number or an array of the spatial shape (a noise map: the noise term of grid points
    y and y + t is K (sigma(y)^2 + sigma(y + t)^2)); `rician` gives sqrt(max(NLM(x^2) - 2 sigma(x)^2,
    0)); pixels where `mask` is 0 keep their input. Returns float64, the shape of `image`.
    """
    x = np.asarray(image, dtype=np.longdouble)
    spatial = x.shape[:-1]
    n, K = len(spatial), x.shape[-1]
    # Per axis (contract 6.4): a number stands for every axis.
    sizes = patch_size if isinstance(patch_size, tuple) else (patch_size,) * n
    ds = patch_distance if isinstance(patch_distance, tuple) else (patch_distance,) * n
    ss = tuple(v + 1 if v % 2 == 0 else v for v in sizes)
    os_ = tuple(v // 2 for v in ss)
    E = max(o + d for o, d in zip(os_, ds))  # every term reads within o + d of its voxel
    width = [(E, E)] * n
    padded = np.pad(x, width + [(0, 0)], mode="reflect")
    sigma2 = np.broadcast_to(np.asarray(sigma, dtype=np.longdouble) ** 2, spatial)
    padded_s2 = np.pad(sigma2, width, mode="reflect")
    values = padded * padded if rician else padded
    norm = np.longdouble(K) * np.longdouble(h) * np.longdouble(h)
    for v in ss:
        norm = norm * np.longdouble(v)
    box = list(itertools.product(*[range(-o + 1, o + 1) for o in os_]))  # the (s - 1)-wide off-centre box

    def at(array, offset):
        """array at every voxel shifted by `offset` (padded coordinates)."""
        return array[tuple(slice(E + u, E + u + m) for u, m in zip(offset, spatial))]

    def raw(start, t):
        """The patch distance of the pairs (c, c + t) for c = every voxel + start: the box sum of
        D(y) = sum_k (x_k(y) - x_k(y + t))^2 - K (sigma^2(y) + sigma^2(y + t))."""
        total = np.zeros(spatial, dtype=np.longdouble)
        if ss[0] == 1:  # 1 on every axis or on none
            return total
        for j in box:
            y = tuple(a + b for a, b in zip(start, j))
            yt = tuple(a + b for a, b in zip(y, t))
            squares = np.sum((at(padded, y) - at(padded, yt)) ** 2, axis=-1)
            total += squares - K * (at(padded_s2, y) + at(padded_s2, yt))
        return total

    weight_sum = np.zeros(spatial, dtype=np.longdouble)
    result = np.zeros(x.shape, dtype=np.longdouble)
    # The shifts of one half space (the last axis over [0, d]) with both terms of each pair.
    ranges = [range(-d, d + 1) for d in ds[:-1]] + [range(0, ds[-1] + 1)]
    for t in itertools.product(*ranges):
        alpha = np.longdouble(0.5 if t[-1] == 0 else 1.0)
        minus = tuple(-a for a in t)
        centre = _weights(raw((0,) * n, t), norm, alpha)  # w(x, t)
        target = _weights(raw(minus, t), norm, alpha)  # w(x - t, t)
        weight_sum += centre + target
        result += centre[..., None] * at(values, t) + target[..., None] * at(values, minus)
    mean = result / weight_sum[..., None]
    if rician:
        mean = np.sqrt(np.maximum(mean - 2 * sigma2[..., None], 0))
    if mask is not None:
        mean = np.where((np.asarray(mask) != 0)[..., None], mean, x)
    return mean.astype(np.float64)


def _fast_exp_x86(y):
    """fe(y) for any y as scikit-image's C code computes it on x86-64 (cvttsd2si: out-of-range
    arguments give INT32_MIN; the 32-bit addition wraps), as long doubles."""
    p = EXP_A * y
    inside = (p > -2147483649) & (p < 2147483648)
    i = np.where(inside, np.trunc(np.where(inside, p, 0)), -2147483648).astype(np.int64)
    high = (i + EXP_BC) % (1 << 32)
    return (high.astype(np.uint64) << np.uint64(32)).view(np.float64).astype(np.longdouble)


def classic_nl_means_reference(image, patch_size, patch_distance, h, sigma=0.0, *, rician=False, mask=None):
    """Classic-mode (fast_mode=False) non-local means of `image` (spatial axes, then one channel axis;
    2D, or 3D with one channel) in long double: Gaussian patch weights, candidates within the
    window clipped to the image, the distance cut checked before each patch row, with the Rician
    model and the mask of contract section 6. Returns float64, the shape of `image`."""
    x = np.asarray(image, dtype=np.longdouble)
    spatial = x.shape[:-1]
    n, K = len(spatial), x.shape[-1]
    s = patch_size + 1 if patch_size % 2 == 0 else patch_size
    o, d = s // 2, patch_distance
    a = np.longdouble(s - 1) / 4
    offsets = np.array(list(itertools.product(range(-o, o + 1), repeat=n)))
    kernel = np.exp(-np.sum(offsets ** 2, axis=1).astype(np.longdouble) / (2 * a * a))
    factor = 1 / ((K * kernel.sum() if n == 2 else kernel.sum()) * np.longdouble(h) * np.longdouble(h))
    kernel = (kernel * factor).reshape((s,) * n)
    v = 2 * np.longdouble(sigma) ** 2
    padded = np.pad(x, [(o + d, o + d)] * n + [(0, 0)], mode="reflect")
    values = x * x if rician else x

    def patches(shift):
        """Every pixel's patch offset `a` further and shifted by `shift`, per patch row a0."""
        return padded[tuple(slice(d + u, d + u + m) for u, m in zip(shift, spatial))]

    weight_sum = np.zeros(spatial, dtype=np.longdouble)
    result = np.zeros(x.shape, dtype=np.longdouble)
    index = np.indices(spatial)
    for delta in itertools.product(range(-d, d + 1), repeat=n):
        valid = np.all([(index[i] + delta[i] >= 0) & (index[i] + delta[i] < spatial[i]) for i in range(n)], axis=0)
        dist = np.zeros(spatial, dtype=np.longdouble)
        cut = np.zeros(spatial, dtype=bool)
        for row in range(s):  # the patch's first axis; the cut is checked before each row
            cut |= dist > CUTOFF
            for rest in itertools.product(range(s), repeat=n - 1):
                j = (row,) + rest
                centre = patches(j)
                other = patches(tuple(jj + dd for jj, dd in zip(j, delta)))
                term = np.sum(kernel[j] * ((centre - other) ** 2 - v), axis=-1)
                dist = np.where(cut, dist, dist + term)
        weight = np.where(cut | ~valid, 0, _fast_exp_x86(-np.maximum(dist, 0)))
        moved = np.roll(values, shift=tuple(-dd for dd in delta), axis=tuple(range(n)))  # x + delta where valid
        weight_sum += weight
        result += weight[..., None] * np.where(valid[..., None], moved, 0)
    mean = result / weight_sum[..., None]
    if rician:
        mean = np.sqrt(np.maximum(mean - v, 0))
    if mask is not None:
        mean = np.where((np.asarray(mask) != 0)[..., None], mean, x)
    return mean.astype(np.float64)
