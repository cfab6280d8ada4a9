"""``LBFGS``: limited-memory BFGS over all parameters as one flat vector, with PyTorch's stopping rules and its
optional strong-Wolfe line search, so an L-BFGS script (its closure re-evaluated many times per ``step``) runs
on gradviz's engine as on PyTorch, to the same iterates.

The closure's forward and backward are ordinary traced code; the parameter moves between evaluations are this
optimizer's updates (version bumps, seen by observers as updates of this optimizer, as for the others).
"""

import numpy as np

from ..autograd import grad_mode, observer
from .optimizer import Optimizer, bump_version, state_tensor

_observers = observer._observers


class LBFGS(Optimizer):
    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(lr, (int, float)) and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ----- the parameters as one flat vector ----------------------------------------------------------------
    def _flat_grad(self):
        parts = [np.zeros(p._data.size, dtype=p._data.dtype) if p._grad is None else p._grad._data.reshape(-1)
                 for p in self._params]
        return np.concatenate(parts) if parts else np.zeros(0)

    def _moved(self, change):
        """Apply ``change(p, flat_slice)`` to each parameter in place, as this optimizer's update."""
        def apply():
            offset = 0
            for p in self._params:
                n = p._data.size
                change(p, offset, n)
                offset += n
                bump_version(p)

        if _observers.get():
            with observer.quiet(self):
                apply()
        else:
            apply()

    def _add_step(self, t, d):
        def add(p, offset, n):
            p._data += (t * d[offset:offset + n]).reshape(p._data.shape).astype(p._data.dtype, copy=False)

        self._moved(add)

    def _set_params(self, values):
        def put(p, offset, n):
            p._data[...] = values[offset:offset + n].reshape(p._data.shape)

        self._moved(put)

    def _evaluate(self, closure):
        with grad_mode.enable_grad():
            return float(closure())

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and flat gradient at ``x + t d``; the parameters are put back to ``x`` after."""
        self._add_step(t, d)
        loss = self._evaluate(closure)
        grad = self._flat_grad().copy()
        self._set_params(x)
        return loss, grad

    # ----- one step: up to max_iter iterations ------------------------------------------------------------
    def step(self, closure):
        if closure is None:
            raise RuntimeError("LBFGS requires a closure: optimizer.step(closure)")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search_fn = group["history_size"], group["line_search_fn"]
        if line_search_fn is not None and line_search_fn != "strong_wolfe":
            raise RuntimeError("only 'strong_wolfe' is supported")

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with grad_mode.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad().copy()
        if np.abs(flat_grad).max(initial=0.0) <= tolerance_grad:  # already at a stationary point
            self._finish()
            return orig_loss

        d, t = _array(state.get("d")), state.get("t")
        old_dirs = [_array(v) for v in state.get("old_dirs", [])]
        old_stps = [_array(v) for v in state.get("old_stps", [])]
        ro, h_diag = list(state.get("ro", [])), state.get("H_diag")
        prev_flat_grad, prev_loss = _array(state.get("prev_flat_grad")), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y, s = flat_grad - prev_flat_grad, d * t
                ys = float(y @ s)
                if ys > 1e-10:  # curvature condition: only then is the pair a valid memory
                    if len(old_dirs) == history_size:  # the oldest pair makes room
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag)
            prev_flat_grad, prev_loss = flat_grad.copy(), loss

            # the first step is scaled by the gradient's size; later ones trust the curvature memory
            t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:  # not a descent direction (any more)
                break

            if line_search_fn is not None:
                x_init = self._flat_params()
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda x, step, direction: self._directional_evaluate(closure, x, step, direction),
                    x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)  # within the budget
                self._add_step(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_step(t, d)
                ls_evals, opt_cond = 0, False
                if n_iter != max_iter:  # the last iteration's loss is the next step's first evaluation
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad().copy()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break  # the parameters or the loss stopped moving

        state.update(d=state_tensor(d), t=t, old_dirs=[state_tensor(v) for v in old_dirs],
                     old_stps=[state_tensor(v) for v in old_stps], ro=ro, H_diag=h_diag,
                     prev_flat_grad=state_tensor(prev_flat_grad), prev_loss=prev_loss)
        self._finish()
        return orig_loss

    def _flat_params(self):
        return np.concatenate([p._data.reshape(-1) for p in self._params]).copy()

    def _finish(self):
        self._opt_called = True
        self._notify("step")


def _array(value):
    """A state entry back as a numpy array (state keeps tensors, as PyTorch's does)."""
    return None if value is None else np.array(value._data, copy=True)


def _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag):
    """The L-BFGS two-loop recursion: the inverse-Hessian approximation applied to the negative gradient."""
    alphas = [0.0] * len(old_dirs)
    q = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        alphas[i] = float(old_stps[i] @ q) * ro[i]
        q = q - alphas[i] * old_dirs[i]
    r = q * h_diag
    for i in range(len(old_dirs)):
        beta = float(old_dirs[i] @ r) * ro[i]
        r = r + (alphas[i] - beta) * old_stps[i]
    return r


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through two points with their values and slopes, clipped to ``bounds`` (by default
    the interval between the points); the interval's middle when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square ** 0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(evaluate, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` meeting the strong Wolfe conditions: grow the step until a bracket holds a
    minimum, then shrink the bracket by cubic interpolation. Returns (loss, flat grad, t, evaluations)."""
    d_norm = float(np.abs(d).max())
    f_new, g_new = evaluate(x, t, d)
    evals, ls_iter = 1, 0
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g.copy(), gtd
    done = False
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):  # sufficient decrease failed
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:  # curvature condition met: done
            bracket, bracket_f, bracket_g, done = [t], [f_new], [g_new], True
            break
        if gtd_new >= 0:  # the slope turned: the minimum is behind
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until the strong Wolfe conditions hold
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # a step too close to the bracket's ends makes no progress: pushed inside, unless just tried
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) else min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(x, t, d)
        evals += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals
