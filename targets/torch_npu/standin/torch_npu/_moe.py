"""npu_moe_distribute_dispatch_v2 / npu_moe_distribute_combine_v2 on the CPU stand-in, from
the torch_npu pages and the ops-transformer README and kernel sources of
MoeDistributeDispatchV2 / MoeDistributeCombineV2 (docs/ascend.md, rows moe.* and npu.moe.*).

The ranks are the stand-in's torch.distributed processes: every collective exchanges the
ranks' arrays through torch.distributed.exchange. Modelled: routed experts on ranks e / L + S
(shared-expert ranks first), shared expert i on ranks i*R .. (i+1)*R - 1 (source s to rank
i*R + s % R), rows received by local expert, then source, then the source's (token, k) order,
per-token INT8 quantisation on the sender (quant_mode 2: f32 product with the destination's
smooth row, r = 127 / max|v|, v * r cast to nearest even, the scale 1 / r), counts or running
sums per local expert, and the combine's f32 sum: each routed row times its weight (one f32
product, one f32 add) in k order, then the shared rows unweighted, one cast to nearest even.
Rejected as the pages reject: products other than Atlas A2 / A3, shared experts on A2, hidden
sizes, BS and top-k outside their ranges, repeated experts in a row, a 1-D mask with a true
after a false, quant modes other than 0 and 2. On Atlas A2 the limits are the A2 tiling's
(hicann/ops-transformer@c29bc10 mc2/moe_distribute_dispatch_v2 and combine_v2,
op_host/op_tiling: MoeDistributeDispatchA2CheckAttrAndSetTiling, ...CheckShapeAndSetTiling,
MoeDistributeCombineA2...): epWorldSize a multiple of 8 up to 256, moeExpertNum a multiple of
it up to 512, H a multiple of 32 up to 7168 (10240 under the hierarchy algorithm: commAlg
"hierarchy", or an empty commAlg with HCCL_INTRA_PCIE_ENABLE=1 and HCCL_INTRA_ROCE_ENABLE=0),
BS up to 256, K up to 16, raised as the tiling failure. Rows and outputs the API does not write
are NaN (int8 rows: 0) here."""
import os
import numpy as np

import torch

from . import _soc
from ._fia import fail

_DISPATCH = "aclnnMoeDistributeDispatchV2"
_COMBINE = "aclnnMoeDistributeCombineV2"


def _group(op, group_ep, ep_world_size, ep_rank_id):
    import torch.distributed as dist
    g = dist.group.WORLD
    if g.comm is None or group_ep != g.comm:
        raise RuntimeError("group_ep %r is not the process group's communicator" % group_ep)
    if int(ep_world_size) != g.world or int(ep_rank_id) != g.rank:
        fail(op, "epWorldSize %s / epRankId %s do not match the communicator (%d ranks, rank %d)"
             % (ep_world_size, ep_rank_id, g.world, g.rank))
    return dist


def _product(op, shared_ranks):
    fam = _soc.family(torch.npu.get_device_name(0))
    if fam not in ("A2", "A3"):
        fail(op, "product %s is not supported (Atlas A2 / A3)" % torch.npu.get_device_name(0),
             code="361001 ACLNN_ERR_RUNTIME_ERROR")
    if fam == "A2" and shared_ranks:
        fail(op, "Atlas A2 does not support shared experts (sharedExpertRankNum must be 0)")
    return fam


_TILING = "561002 ACLNN_ERR_INNER_TILING_ERROR"


def _hierarchy(op, comm_alg):
    """Whether the A2 kernels run the hierarchy algorithm (the tiling's CheckCommAlg)."""
    if comm_alg in (None, "", "0"):
        return (os.environ.get("HCCL_INTRA_PCIE_ENABLE") == "1"
                and os.environ.get("HCCL_INTRA_ROCE_ENABLE") == "0")
    if comm_alg not in ("fullmesh", "hierarchy"):
        fail(op, "CheckCommAlg Failed: commAlg is not support", code=_TILING)
    return comm_alg == "hierarchy"


def _a2_tiling(op, w, bs, h, e, k, hierarchy):
    """The A2 tiling's attribute and shape checks, raised as its failure."""
    what = op.replace("aclnn", "").replace("V2", "A2")
    if h == 0 or h % 32 or h > (10240 if hierarchy else 7168):
        fail(op, "%s CheckShapeAndSetTiling Failed: hiddensize is invalid (H %d)" % (what, h),
             code=_TILING)
    if not 0 < bs <= 256:
        fail(op, "%s CheckShapeAndSetTiling Failed: batchsize is invalid (BS %d)" % (what, bs),
             code=_TILING)
    if not 0 < k <= 16:
        fail(op, "%s CheckShapeAndSetTiling Failed: k is invalid (K %d)" % (what, k),
             code=_TILING)
    if not 0 < w <= 256 or w % 8:
        fail(op, "%s CheckAttrAndSetTiling Failed: epWorldSize is invalid (%d)" % (what, w),
             code=_TILING)
    if not 0 < e <= 512 or e % w:
        fail(op, "%s CheckAttrAndSetTiling Failed: moeExpertNum is invalid (%d)" % (what, e),
             code=_TILING)


def _layout(op, fam, w, bs, h, e, k, ns, s, hierarchy=False):
    if fam == "A2":
        _a2_tiling(op, w, bs, h, e, k, hierarchy)
    elif not 1024 <= h <= 8192:
        fail(op, "H %d: [1024, 8192] on A3" % h)
    if not 0 < bs <= (256 if fam == "A2" else 512):
        fail(op, "BS %d out of range" % bs)
    if not 0 < k <= 16 or k > e:
        fail(op, "K %d: 0 < K <= 16 and K <= moeExpertNum" % k)
    if s:
        if ns <= 0 or s % ns:
            fail(op, "sharedExpertRankNum %d must be a multiple of sharedExpertNum %d" % (s, ns))
    elif ns not in (0, 1):
        fail(op, "sharedExpertNum must be 0 or 1 without shared expert ranks")
    if s >= w or e % (w - s):
        fail(op, "moeExpertNum %d must be a multiple of epWorldSize - sharedExpertRankNum" % e)
    return e // (w - s)


def _active(op, mask, bs):
    if mask is None:
        return bs
    m = np.asarray(mask._a).astype(bool).reshape(-1)
    if m.shape[0] != bs:
        fail(op, "xActiveMask must be 1-D (BS,); 2-D masks are not modelled by the stand-in")
    n = int(m.sum())
    if not m[:n].all():
        fail(op, "xActiveMask: true values must come before false ones")
    return n


def _f32(bits, dt):
    return torch.Tensor(bits, dt, "npu")._f32()


def dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                scales=None, x_active_mask=None, expert_scales=None, group_tp="",
                tp_world_size=0, tp_rank_id=0, expert_shard_type=0, shared_expert_num=1,
                shared_expert_rank_num=0, quant_mode=0, global_bs=0, expert_token_nums_type=1,
                comm_alg="", **unsupported):
    if unsupported:
        raise TypeError("stand-in: arguments not modelled: %s" % ", ".join(sorted(unsupported)))
    dist = _group(_DISPATCH, group_ep, ep_world_size, ep_rank_id)
    w, me, e = int(ep_world_size), int(ep_rank_id), int(moe_expert_num)
    s, ns = int(shared_expert_rank_num), int(shared_expert_num)
    fam = _product(_DISPATCH, s)
    if tp_world_size not in (0, 1) or expert_shard_type != 0 or global_bs != 0:
        fail(_DISPATCH, "the TP domain, expertShardType != 0 and globalBS are not modelled")
    if int(quant_mode) not in (0, 2):
        fail(_DISPATCH, "quantMode %s: 0 or 2 are modelled" % quant_mode)
    if scales is not None and int(quant_mode) != 2:
        fail(_DISPATCH, "scales without dynamic quantisation (static quant) is not modelled")
    dt = x.dtype
    if dt.name not in ("bfloat16", "float16"):
        fail(_DISPATCH, "x must be FLOAT16 or BFLOAT16")
    bs, h = x.shape
    k = expert_ids.shape[1]
    ns_eff = ns if s else 0
    hierarchy = fam == "A2" and _hierarchy(_DISPATCH, comm_alg)
    L = _layout(_DISPATCH, fam, w, bs, h, e, k, ns_eff, s, hierarchy)
    per = s // ns_eff if ns_eff else 1
    n = _active(_DISPATCH, x_active_mask, bs)
    ids = np.asarray(expert_ids._a).astype(np.int64)
    for t in range(n):
        row = ids[t]
        if np.any((row < 0) | (row >= e)) or len(set(row.tolist())) != k:
            fail(_DISPATCH, "expertIds row %d: values in [0, moeExpertNum), none twice" % t)
    xs = dist.exchange(np.asarray(x._a))
    idss = dist.exchange(ids)
    ns_all = dist.exchange(np.array([n], np.int64))
    sm = None if scales is None else scales._f32()
    rows = []  # (key, source, token, slot, smooth row)
    if me < s:
        for src in range(w):
            if src % per == me % per:
                for t in range(int(ns_all[src][0])):
                    rows.append(((0, src, t), src, t, k + me // per, me // per))
        local = 1
    else:
        for src in range(w):
            for t in range(int(ns_all[src][0])):
                for kk in range(k):
                    ex = int(idss[src][t, kk])
                    if ex // L + s == me:
                        rows.append(((ex % L, src, t * k + kk), src, t, kk, ns_eff + ex))
        local = L
    rows.sort(key=lambda r: r[0])
    a = bs * w * (ns_eff if me < s else min(L, k)) // (s if me < s else 1)
    a = max(a, len(rows), 1)
    quant = int(quant_mode) == 2
    out_x = np.zeros((a, h), np.int8) if quant else np.full((a, h), np.nan, np.float32)
    dyn = np.full(a, np.nan, np.float32)
    assist = np.zeros(a * 128, np.int32)
    for i, (key, src, t, slot, srow) in enumerate(rows):
        v = _f32(xs[src][t], dt)
        if quant:
            if sm is not None:
                v = (v * sm[srow]).astype(np.float32)
            amax = np.float32(np.max(np.abs(v)))
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.float32(127) / amax
                q = np.rint(v * r)
            out_x[i] = np.clip(np.nan_to_num(q, nan=0.0), -128, 127).astype(np.int8)
            with np.errstate(divide="ignore"):
                dyn[i] = np.float32(1) / r
        else:
            out_x[i] = v
        assist[3 * i:3 * i + 3] = (src, t, slot)
    counts = np.zeros(local, np.int64)
    for key, *_ in rows:
        counts[key[0]] += 1
    nums = np.cumsum(counts) if int(expert_token_nums_type) == 0 else counts
    # Running sums of the received rows by (local expert, source) (by source on a shared rank).
    blocks = np.zeros(local * w, np.int64)
    for key, src, *_ in rows:
        blocks[key[0] * w + src] += 1
    ep_recv = np.cumsum(blocks).astype(np.int32)
    expand = (torch.Tensor(out_x, torch.int8, "npu") if quant
              else torch.Tensor(out_x, torch.float32, "npu").to(dt))
    return (expand, torch.Tensor(dyn, torch.float32, "npu"),
            torch.Tensor(assist, torch.int32, "npu"), torch.Tensor(nums, torch.int64, "npu"),
            torch.Tensor(ep_recv, torch.int32, "npu"),
            torch.Tensor(np.zeros(1, np.int32), torch.int32, "npu"),
            torch.Tensor(np.zeros(a, np.float32), torch.float32, "npu"))


def combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
               group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None,
               x_active_mask=None, expand_scales=None, shared_expert_x=None, group_tp="",
               tp_world_size=0, tp_rank_id=0, expert_shard_type=0, shared_expert_num=1,
               shared_expert_rank_num=0, global_bs=0, comm_quant_mode=0, comm_alg="",
               **unsupported):
    if unsupported:
        raise TypeError("stand-in: arguments not modelled: %s" % ", ".join(sorted(unsupported)))
    if expert_scales is None:
        raise TypeError("npu_moe_distribute_combine_v2() missing required argument "
                        "'expert_scales'")
    dist = _group(_COMBINE, group_ep, ep_world_size, ep_rank_id)
    w, me, e = int(ep_world_size), int(ep_rank_id), int(moe_expert_num)
    s, ns = int(shared_expert_rank_num), int(shared_expert_num)
    fam = _product(_COMBINE, s)
    if shared_expert_x is not None or int(comm_quant_mode) != 0:
        fail(_COMBINE, "shared_expert_x and comm_quant_mode are not modelled")
    dt = expand_x.dtype
    if dt.name not in ("bfloat16", "float16"):
        fail(_COMBINE, "expandX must be FLOAT16 or BFLOAT16")
    ids = np.asarray(expert_ids._a)
    bs, k = ids.shape
    h = expand_x.shape[1]
    if fam == "A2":
        _a2_tiling(_COMBINE, w, bs, h, e, k, _hierarchy(_COMBINE, comm_alg))
    ns_eff = ns if s else 0
    n = _active(_COMBINE, x_active_mask, bs)
    sent = int(np.asarray(ep_send_counts._a).reshape(-1)[-1])
    rows = np.asarray(expand_x._a)[:sent]
    trip = np.asarray(assist_info_for_combine._a)[:3 * sent].reshape(sent, 3)
    all_rows = dist.exchange(rows)
    all_trip = dist.exchange(trip)
    mine = {}
    for rr, tt in zip(all_rows, all_trip):
        for i in range(tt.shape[0]):
            if int(tt[i, 0]) == me:
                mine[(int(tt[i, 1]), int(tt[i, 2]))] = rr[i]
    wts = expert_scales._f32().reshape(bs, k)
    out = np.full((bs, h), np.nan, np.float32)
    for t in range(n):
        acc = np.zeros(h, np.float32)
        for kk in range(k):
            acc = acc + _f32(mine[(t, kk)], dt) * wts[t, kk]
        for i in range(ns_eff):
            acc = acc + _f32(mine[(t, k + i)], dt)
        out[t] = acc
    return torch.Tensor(out, torch.float32, "npu").to(dt)
