"""The index arithmetic of conv_halo3x3s2 (src/mscred/ops/im2col/halo_s2.cuh), replayed in numpy on the CPU.

Stages the input into the kernel's pair-plane layout exactly as its producer warps address it, reads every
consumer lane's B fragments and the weights in the kernel's permuted K order, runs the m16n8k8 products, and
writes the outputs through the consumer warps' per-warp slices; compares with a float64 convolution (TF "same",
stride 2) and counts 8-byte B loads whose half-warp touches a bank twice. Written before the kernel first ran on
the GPU, to get the layout right without spending device time; at n = 30 every B load is conflict-free (the
conflicts at small n are pixels past the tile's rows, which all read pixel 0 and are never stored).
Usage: python3 benchmarks/halo_s2_layout_check.py   (~1 s; numpy only)
"""
import numpy as np
CS2, SHIFT, C, O, K = 1058, 8, 32, 64, 288
BUF = 8*CS2 + SHIFT; LDW = K + 4
def pplane(pp): return pp*CS2 + (SHIFT if pp >= 4 else 0)
def pair(c): return (c & 1) + 2*(c >> 2)
def cell(c, sr, sc, SW): return pplane(pair(c)) + 2*(sr*SW + sc) + ((c >> 1) & 1)
def slot(t, h, s): return (t & 1) + 8*(t >> 1) + 2*h + 4*s
def same(n, k, st):
    o = (n + st - 1)//st; tot = max((o-1)*st + k - n, 0); return o, tot//2
def run(N, H, W):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)); w = rng.standard_normal((O, C, 3, 3)); b = rng.standard_normal(O)
    Ho, pt = same(H, 3, 2); Wo, pl = same(W, 3, 2)
    Wp = (Wo+7)//8*8; R = min(128//Wp, 8, Ho); SW = 2*Wo+1; NR = 2*R+1; tpi = -(-Ho//R)
    assert SW <= 31
    wf = w.reshape(O, C, 9)
    ws = np.zeros((O, LDW))
    for k in range(K):
        tap, q = k//32, k % 32
        c = (q//16)*16 + slot(q % 4, (q//4) % 2, (q//8) % 2)
        ws[:, k] = wf[:, c, tap]
    # reference
    xp = np.zeros((N, C, H+4, W+4)); xp[:, :, pt:pt+H, pl:pl+W] = x
    ref = np.zeros((N, O, Ho, Wo))
    for i in range(3):
        for j in range(3):
            patch = xp[:, :, i:i+2*Ho:2, j:j+2*Wo:2][:, :, :Ho, :Wo]
            ref += np.einsum('nchw,oc->nohw', patch, w[:, :, i, j])
    ref += b[None, :, None, None]
    y = np.full((N, O, Ho, Wo), np.nan)
    banks_bad = 0
    for tile in range(N*tpi):
        n, rb = divmod(tile, tpi); r0 = rb*R; rows = min(Ho - r0, R)
        acc = {}
        for half in (0, 1):
            buf = np.full(BUF, np.nan)
            top = 2*r0 - pt
            for warp in range(8):
                c0 = (warp & 1) + 4*(warp >> 1)
                assert pair(c0) == warp
                for pc in range(2):
                    for sr in range(17):
                        for lane in range(32):
                            if lane >= SW: continue
                            ok = 0 <= lane - pl < W and 0 <= top + sr < H and sr < NR
                            v = x[n, half*16 + c0 + 2*pc, top+sr, lane-pl] if ok else 0.0
                            a = pplane(warp) + 2*lane + 2*sr*SW + pc
                            assert a == cell(c0 + 2*pc, sr, lane, SW)
                            buf[a] = v
            for warp in range(8):
                wm, wn = divmod(warp, 4)
                for j in range(4):
                    B = np.zeros((9, 2, 8, 8))  # tap, ks, k(8), n(8)
                    addrs = {}
                    for g in range(8):
                        px = wn*32 + j*8 + g; row, col = divmod(px, Wp)
                        if row >= R: row = col = 0
                        for t in range(4):
                            for ti in range(3):
                                base = pplane(pair(slot(t, 0, 0))) + 2*((2*row + ti)*SW + 2*col)
                                for tj in range(3):
                                    for ks in range(2):
                                        a = base + 2*ks*CS2 + 2*tj
                                        assert a % 2 == 0
                                        for h in range(2):
                                            B[ti*3+tj, ks, t+4*h, g] = buf[a + h]
                                        addrs.setdefault((ti, tj, ks), {})[(g, t)] = a
                    for key, d in addrs.items():
                        for half_warp in (0, 1):  # 8-byte loads: each half-warp (lanes 16h..16h+15) one wavefront
                            banks = []
                            for (g, t), a in d.items():
                                if (g*4 + t) // 16 == half_warp: banks += [a % 32, (a+1) % 32]
                            if len(set(banks)) != 32: banks_bad += 1
                    for i in range(2):
                        m0 = wm*32 + i*16
                        a = acc.setdefault((wm, wn, i, j), np.tile(b[m0:m0+16, None], (1, 8)))
                        for tap in range(9):
                            for ks in range(2):
                                A = ws[m0:m0+16, tap*32 + half*16 + ks*8: tap*32 + half*16 + ks*8 + 8]
                                Bm = B[tap, ks]
                                # pixels past the tile read garbage (NaN allowed only for unstored outputs)
                                acc[(wm, wn, i, j)] = acc[(wm, wn, i, j)] + A @ Bm
        # per-warp epilogue as conv_halo3x3s2's consumers: slice [32 ch][33], run of wrows*Wo floats per channel
        for warp in range(8):
            wm, wn = divmod(warp, 4)
            wrow0 = wn*32 // Wp
            wrows = min(rows - wrow0, 32 // Wp)
            wout = np.full(32*33, np.nan)
            for i in range(2):
                for j in range(4):
                    a = acc[(wm, wn, i, j)]
                    for g in range(8):
                        for t in range(4):
                            for v in range(4):
                                u = v % 2
                                px = j*8 + 2*t + u; lrow, col = divmod(px, Wp)
                                olrow = lrow if col < Wo else 32
                                if olrow >= wrows: continue
                                ch = i*16 + g + 8*(v//2)
                                wout[ch*33 + lrow*Wo + col] = a[g + 8*(v//2), 2*t + u]
            run = wrows*Wo if wrows > 0 else 0
            for c in range(32):
                for lane in range(32):
                    if lane < run:
                        flat = (r0 + wrow0)*Wo + lane
                        y[n, wm*32 + c].reshape(-1)[flat] = wout[c*33 + lane]
    err = np.nanmax(np.abs(y - ref)); miss = np.isnan(y).sum()
    print(f"N={N} H={H} W={W} Ho={Ho} pt={pt} R={R} tiles/img={tpi}: max err {err:.2e}, missing {miss}, conflicting B loads {banks_bad}")
for N, H, W in [(2, 30, 30), (1, 29, 29), (1, 16, 16), (2, 5, 5), (1, 17, 17), (1, 9, 9)]:
    run(N, H, W)
