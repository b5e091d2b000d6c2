"""The pyhpc workloads (EOS, TKE) compute what their originals compute.

EOS: the 48 coefficients reproduce the published check values of GSW 3.01's 48-term
``gsw_rho`` and ``gsw_dynamic_enthalpy`` (the Matlab toolbox's documented examples), and
``gsw_dHdT`` is the CT-derivative of that dynamic enthalpy, computed independently here by
quadrature of specific volume over pressure and a central difference. TKE: the Thomas solver
agrees with ``numpy.linalg.solve``, the masked column systems are solved where there is water, and
the forward keeps the original's in-place updates of its inputs.
"""

from __future__ import annotations

import numpy as np
import torch

from grace.bench.workloads import get
from grace.bench.workloads.tb_pyhpc import EOS48_COEFFICIENTS, grid_shape, gsw_dHdT, tke_functions

# GSW Matlab toolbox 3.01 (48-term equation), the examples of gsw_rho and gsw_dynamic_enthalpy.
CHECK_SA = np.array([34.7118, 34.8915, 35.0256, 34.8472, 34.7366, 34.7324])
CHECK_CT = np.array([28.8099, 28.4392, 22.7862, 10.2262, 6.8272, 4.3236])
CHECK_P = np.array([10.0, 50.0, 125.0, 250.0, 600.0, 1000.0])
CHECK_RHO = 1e3 * np.array([1.021840446566116, 1.022262985174925, 1.024427770449335,
                            1.027790499661129, 1.029837753532120, 1.032002083264508])
CHECK_DYNAMIC_ENTHALPY = 1e3 * np.array([0.097864649180491, 0.489161224318287, 1.220511487957649,
                                         2.433730243703573, 5.833879407549211, 9.711445229571982])


def rho48(sa: np.ndarray, ct: np.ndarray, p: np.ndarray) -> np.ndarray:
    """In-situ density [kg/m^3] of the 48-term rational expression, written out independently."""
    v = (None,) + EOS48_COEFFICIENTS
    r = np.sqrt(sa)
    num = (v[1] + ct * (v[2] + ct * (v[3] + v[4] * ct))
           + sa * (v[5] + ct * (v[6] + v[7] * ct) + r * (v[8] + ct * (v[9] + ct * (v[10] + v[11] * ct))))
           + p * (v[12] + ct * (v[13] + v[14] * ct) + sa * (v[15] + v[16] * ct)
                  + p * (v[17] + ct * (v[18] + v[19] * ct) + v[20] * sa)))
    den = (v[21] + ct * (v[22] + ct * (v[23] + ct * (v[24] + v[25] * ct)))
           + sa * (v[26] + ct * (v[27] + ct * (v[28] + ct * (v[29] + v[30] * ct))) + v[36] * sa
                   + r * (v[31] + ct * (v[32] + ct * (v[33] + ct * (v[34] + v[35] * ct)))))
           + p * (v[37] + ct * (v[38] + ct * (v[39] + v[40] * ct)) + sa * (v[41] + v[42] * ct)
                  + p * (v[43] + ct * (v[44] + v[45] * ct + v[46] * sa) + p * (v[47] + v[48] * ct))))
    return num / den


def dynamic_enthalpy(sa: np.ndarray, ct: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Integral of specific volume over sea pressure from 0 to p [J/kg] (1 dbar = 1e4 Pa), Gauss-Legendre."""
    nodes, weights = np.polynomial.legendre.leggauss(40)
    pressures = 0.5 * p * (nodes[:, None] + 1.0)
    return 1e4 * 0.5 * p * np.sum(weights[:, None] / rho48(sa, ct, pressures), axis=0)


def dhdt(sa: np.ndarray, ct: np.ndarray, p: np.ndarray) -> np.ndarray:
    return gsw_dHdT(torch.from_numpy(sa), torch.from_numpy(ct), torch.from_numpy(p)).numpy()


def test_eos48_coefficients_give_gsw_check_densities() -> None:
    np.testing.assert_allclose(rho48(CHECK_SA, CHECK_CT, CHECK_P), CHECK_RHO, rtol=1e-13)


def test_dynamic_enthalpy_by_quadrature_gives_gsw_check_values() -> None:
    np.testing.assert_allclose(dynamic_enthalpy(CHECK_SA, CHECK_CT, CHECK_P), CHECK_DYNAMIC_ENTHALPY, rtol=1e-12)


def test_gsw_dHdT_is_the_ct_derivative_of_dynamic_enthalpy() -> None:
    rng = np.random.default_rng(0)
    sa = np.concatenate([CHECK_SA, rng.uniform(1e-2, 10, 200)])  # the benchmark's ranges too
    ct = np.concatenate([CHECK_CT, rng.uniform(-12, 20, 200)])
    p = np.concatenate([CHECK_P, rng.uniform(0, 1000, 200)])
    h = 1e-3
    central = (dynamic_enthalpy(sa, ct + h, p) - dynamic_enthalpy(sa, ct - h, p)) / (2 * h)
    np.testing.assert_allclose(dhdt(sa, ct, p), central, rtol=1e-8, atol=1e-7)


def test_eos_inputs_follow_generate_inputs() -> None:
    assert grid_shape(1048576) == (204, 204, 26)
    assert grid_shape(4096) == (32, 32, 4)
    workload = get("EOS")
    s, t, p = workload.inputs(workload.build("cpu", 2, "tiny"), 0, "cpu", 2, "tiny")
    assert s.shape == t.shape == (32, 32, 4) and p.shape == (1, 1, 4)
    assert all(x.dtype == torch.float64 for x in (s, t, p))
    assert 1e-2 <= s.min() and s.max() <= 10 and -12 <= t.min() and t.max() <= 20
    assert 0 <= p.min() and p.max() <= 1000


def test_solve_tridiag_matches_numpy() -> None:
    solve_tridiag = tke_functions()["solve_tridiag"]
    rng = np.random.default_rng(1)
    n = 6
    a, c, d = (rng.standard_normal((3, 4, n)) for _ in range(3))
    b = 4.0 + rng.random((3, 4, n))
    a[..., 0] = 0.0
    c[..., -1] = 0.0
    x = solve_tridiag(*(torch.from_numpy(m.copy()) for m in (a, b, c, d))).numpy()
    for i in range(3):
        for j in range(4):
            matrix = np.diag(b[i, j]) + np.diag(a[i, j, 1:], -1) + np.diag(c[i, j, :-1], 1)
            np.testing.assert_allclose(x[i, j], np.linalg.solve(matrix, d[i, j]), rtol=1e-12)


def test_solve_implicit_solves_the_water_part_of_each_column() -> None:
    solve_implicit = tke_functions()["solve_implicit"]
    gen = torch.Generator().manual_seed(2)
    nx, ny, nz = 3, 4, 5
    a, c, d = (torch.randn(nx, ny, nz, dtype=torch.float64, generator=gen) for _ in range(3))
    b, b_edge = (4.0 + torch.rand(nx, ny, nz, dtype=torch.float64, generator=gen) for _ in range(2))
    ks = torch.randint(-1, nz, (nx, ny), generator=gen)
    ks[0, 0], ks[0, 1] = -1, 0
    x, water = solve_implicit(ks, a.clone(), b.clone(), c.clone(), d.clone(), b_edge)
    for i in range(nx):
        for j in range(ny):
            k = int(ks[i, j])
            if k < 0:
                assert not water[i, j].any()
                continue
            assert water[i, j, k:].all() and not water[i, j, :k].any()
            diag = b[i, j, k:].clone()
            diag[0] = b_edge[i, j, k]
            matrix = np.diag(diag.numpy()) + np.diag(a[i, j, k + 1:].numpy(), -1) + np.diag(c[i, j, k:-1].numpy(), 1)
            np.testing.assert_allclose(x[i, j, k:].numpy(), np.linalg.solve(matrix, d[i, j, k:].numpy()),
                                       rtol=1e-10, atol=1e-12)


def test_tke_updates_its_inputs_in_place_like_the_original() -> None:
    """The idiom that keeps TKE out of stock CUDA graphs must survive clean-ups."""
    workload = get("TKE")
    model = workload.build("cpu", 2, "tiny")
    inputs = workload.inputs(model, 0, "cpu", 2, "tiny")
    assert len(inputs) == 21 and inputs[14].dtype == torch.int64
    assert all(x.dtype == torch.float64 for i, x in enumerate(inputs) if i != 14)
    tke, dtke = inputs[19], inputs[20]
    before_tke, before_dtke = tke.clone(), dtke.clone()
    with torch.no_grad():
        out_tke, out_dtke, surf_corr = model(*inputs)
    assert out_tke is tke and out_dtke is dtke
    assert not torch.equal(tke[..., 1], before_tke[..., 1]) and not torch.equal(dtke[..., 0], before_dtke[..., 0])
    assert torch.equal(tke[..., ::2], before_tke[..., ::2]) and torch.equal(dtke[..., 1:], before_dtke[..., 1:])
    assert surf_corr.dtype == torch.float32 and surf_corr.shape == (32, 32)
