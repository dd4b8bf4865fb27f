"""Batches: rows padded to their own longest (dynamic padding), a batch of an encoded set, the paper's random batches
of every epoch, and batches of rows of similar length (for evaluation, and for training with --group-by-length); and
padding-free training steps: the same batches, every layer but attention run on their real tokens only.

Padding-free steps. A batch padded to its longest input (collate) holds B sequences of M positions, of which N are real
tokens. The embeddings, the Q/K/V projections, the attention output, the feed-forward layers and the
LayerNorms act on each token alone: packed into one (N, H) matrix they do the same work on N rows instead of
B * M. Attention needs each sequence's own tokens side by side: q, k, v are scattered back into (B, h, M, d),
scaled_dot_product_attention runs with the key mask, and its output is gathered back to (N, H) (attention is
M / (6H + M) of a layer's matmul work: a few percent). The heads read what they read today: the hidden states are
scattered back into (B, M, H) (zeros at padding) before the pooler and the output layers, so the pooled [CLS]
vector C, SWAG's C_k and SQuAD's S.T_i, E.T_j are those of the padded model.

The same run, not another: on the CPU in fp32 every dropout mask is drawn as the padded model draws it, at the padded
shape ((B, M, H) for the hidden dropouts; attention's (B, h, M, M) inside scaled_dot_product_attention), in the same
order, from the same generator, and the rows of the real tokens are kept: a padding-free step is the padded step up
to float rounding. CUDA and MPS draw dropout with fused kernels that no unfused draw reproduces: there the hidden
masks are drawn at the packed shape (the same distribution, not the same masks). In bf16 on the CPU the run is
another computation already (bf16 rounding), and what the padded run's masks cost would be most of a step there:
a mask costs one call of the generator per element (bernoulli_), while a bf16 step's matmuls take a third of fp32's.
So there (MASKS_BF16) each mask is drawn at the packed shape, from 15 random bits an element (two elements from one
call of the generator: keep when the bits are below (1 - p) * 2^15, a keep probability within 2^-15 of 1 - p, far
inside bf16's rounding of the 1 / (1 - p) scale), attention's too, and the hidden states stay in bf16 between the
layers (the casts autocast would make at every linear layer's input made once). The masks a run drew are recorded
in its results (dropout_masks).

One call, make_padding_free(model), makes a BERT model of any of the three head families pack its own training batches;
the batch, the loss and the training step do not change. A batch may bring where its real tokens lie
(with_real_tokens: found on the host before the batch is sent, so that a step on CUDA never waits for the device
to find them); without it they are found from the mask, the same index. It checks the model first: any other model type, or a
BertModel configured otherwise than packed_bert computes (padding_free_problem), keeps its padded steps, and the run's
log says why in one line. Evaluation stays padded (its inputs are sorted by length,
so it carries little padding to remove).
"""

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from transformers import BertModel
from transformers.modeling_outputs import BaseModelOutputWithPoolingAndCrossAttentions

# --- Batches: rows padded to their own longest, the paper's random batches of every epoch, batches by length ---

def padded(rows, length=None, value=0, dtype=torch.long):
    """Rows of different lengths as one (len(rows), length) tensor, each padded at its end with value
    (length: the longest row, unless given)."""
    L = length or max(len(r) for r in rows)
    out = torch.full((len(rows), L), value, dtype=dtype)
    for r, x in enumerate(rows):
        out[r, :len(x)] = torch.tensor(x, dtype=dtype)
    return out


def batch_width(longest, multiple=1, max_width=None):
    """The width a batch is padded to: its longest row, rounded up to a multiple of `multiple` (1: the longest row
    itself, the recipe's dynamic padding), but never past max_width (the longest a row may be), where the longest
    row does not already reach it: 37 -> 40 with multiple 8; 126 -> 128 (127 with max_width 127)."""
    rounded = -(-longest // multiple) * multiple
    return rounded if max_width is None else min(rounded, max(longest, max_width))


def collate(enc, idx, device, pad_to=None, multiple=1, max_width=None):
    """A batch of the rows idx of an encoded set (a dict of columns), padded to the longest of them (or to pad_to;
    multiple, max_width: that width rounded up, batch_width), on the device (to_device). Rows that hold several
    inputs each (SWAG's four) make (batch, inputs, tokens) tensors; enc["targets"] names the columns that are the
    training targets, enc.get("masks") the token masks padded with False (SQuAD's passage). Token ids are padded
    with 0, whatever the tokenizer's padding id: the attention mask leaves the padding out."""
    rows = [enc["input_ids"][i] for i in idx]
    types = [enc["token_type_ids"][i] for i in idx] if "token_type_ids" in enc else None   # none: RoBERTa, DistilBERT
    choices = isinstance(rows[0][0], list)
    if choices:
        rows, types = [r for row in rows for r in row], types and [t for row in types for t in row]
    L = pad_to or batch_width(max(len(r) for r in rows), multiple, max_width)
    batch = {"input_ids": padded(rows, L), **({"token_type_ids": padded(types, L)} if types else {}),
             "attention_mask": padded([[1] * len(r) for r in rows], L)}
    if choices:
        batch = {k: v.view(len(idx), -1, L) for k, v in batch.items()}
    for key in enc["targets"]:
        batch[key] = torch.tensor([enc[key][i] for i in idx])
    for key in enc.get("masks", ()):
        batch[key] = padded([enc[key][i] for i in idx], L, False, torch.bool)
    return to_device(batch, device)


def to_device(batch, device):
    """Every tensor of a batch (made on the host) on the device. On CUDA each is copied from page-locked memory
    without the host waiting for the copy (non_blocking; the copy is queued before the step's kernels, which run
    after it): a plain copy from pageable memory would make the host wait for the device once per tensor. Elsewhere
    .to(device), the tensors themselves on the CPU."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return {k: v.to(device) for k, v in batch.items()}


def batches_by_length(rows, batch_size):
    """The rows (token ids; a row of several inputs, SWAG's four, by its longest) sorted by length, cut into batches of
    their indices: each batch carries little padding (for evaluation)."""
    lengths = [max(len(r) for r in row) if isinstance(row[0], list) else len(row) for row in rows]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def epoch_batches(n, batch_size, epochs, seed, lengths=None, group=50):
    """The shuffled row order of every epoch, cut into batches (the last one of an epoch may be short).

    With lengths: each run of group * batch_size shuffled rows is sorted by length before it is cut, and
    the batches of the epoch are then shuffled, so that a batch holds rows of similar length."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=g).tolist()
        if lengths is not None:
            chunk = group * batch_size
            order = [i for start in range(0, n, chunk) for i in sorted(order[start:start + chunk], key=lambda i: lengths[i])]
        batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
        if lengths is not None:
            batches = [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]
        out.append(batches)
    return out


# --- Padding-free steps: every layer but attention on the real tokens only ---

# How a padding-free step draws its dropout masks (a run's results record which: computation["dropout_masks"])
MASKS_PADDED = "the padded run's"            # the CPU in fp32: at the padded shape, as the padded model draws them
MASKS_PACKED = "packed shape"                # CUDA, MPS: F.dropout of the packed tokens (fused kernels)
MASKS_BF16 = "packed shape, 15-bit draws"    # the CPU in bf16: keep_mask, attention's too; hidden states in bf16


def dropout_masks(device, dtype):
    """How the padding-free steps of a run on this device, in this autocast dtype (None: fp32), draw their masks."""
    if device.type != "cpu":
        return MASKS_PACKED
    return MASKS_PADDED if dtype is None else MASKS_BF16


@dataclass(frozen=True)
class Packing:
    """Where the N real tokens of a (B, M) batch lie: their flat positions in B * M, and the key mask of attention;
    how the step draws its dropout masks (MASKS_PADDED, MASKS_PACKED or MASKS_BF16)."""
    index: torch.Tensor        # (N,) positions of the real tokens in the flattened (B * M) batch
    shape: tuple               # (B, M)
    key_mask: torch.Tensor     # (B, 1, 1, M): True at each sequence's own tokens
    mask_draw: str = MASKS_PADDED

    def pack(self, t):
        """(B, M, ...) -> (N, ...): the real tokens only, sequence after sequence."""
        return t.flatten(0, 1).index_select(0, self.index)      # its backward: index_add, not a serial index_put

    def unpack(self, x):
        """(N, ...) -> (B, M, ...), zeros at padding."""
        out = x.new_zeros((self.shape[0] * self.shape[1], *x.shape[1:]))
        return out.index_copy(0, self.index, x).view(*self.shape, *x.shape[1:])

    def dropout(self, x, p, training):
        """Dropout of the packed (N, H) x. MASKS_PADDED: its mask drawn as F.dropout draws it for the padded (B, M, H)
        input (bernoulli_(1 - p) at that shape, scaled by 1 / (1 - p)) and the real tokens' rows kept; MASKS_PACKED:
        F.dropout of x itself; MASKS_BF16: keep_mask at x's shape."""
        if not training or p == 0:
            return x
        if self.mask_draw == MASKS_PACKED:
            return F.dropout(x, p, True)             # CUDA, MPS: fused kernels, the same distribution
        if self.mask_draw == MASKS_BF16:
            return dropped(x, p)
        noise = torch.empty((*self.shape, x.shape[-1]), dtype=x.dtype, device=x.device).bernoulli_(1 - p)
        return x * self.pack(noise.div_(1 - p))


KEEP_BITS = 15      # the random bits a MASKS_BF16 mask draws per element


def keep_mask(shape, p, device):
    """A dropout mask (True: kept) of keep probability 1 - p, up to 2^-15, from 15 random bits an element: each call
    of the generator gives 31 random bits (int32 random_), read as two int16 halves, each masked to its low 15 bits
    (uniform in 0 .. 2^15 - 1), kept below round((1 - p) * 2^15): p 0.1 keeps 29,491 of 32,768 (0.899994). About
    7 times faster on the CPU than bernoulli_, which calls the generator once an element."""
    n = math.prod(shape)
    words = torch.empty((n + 1) // 2, dtype=torch.int32, device=device).random_()
    halves = words.view(torch.int16)[:n].bitwise_and_(2 ** KEEP_BITS - 1)
    return (halves < round((1 - p) * 2 ** KEEP_BITS)).view(shape)


def dropped(x, p):
    """x with dropout p applied through keep_mask: kept elements scaled by 1 / (1 - p), the others 0."""
    return torch.where(keep_mask(x.shape, p, x.device), x * (1 / (1 - p)), 0)


def real_token_index(attention_mask):
    """(N,) the flat positions of the real tokens of a right-padded batch (1 or True in its attention mask, of any
    shape: SWAG's (B, 4, M) flattens as its (4B, M)). On a device tensor, nonzero makes the host wait for the device
    (it must learn N): with_real_tokens finds them on the host instead."""
    return attention_mask.flatten().nonzero().squeeze(1)


def with_real_tokens(batch):
    """A batch made on the host with its real tokens' positions beside it ("real_tokens", what packed_bert takes), for
    a padding-free model: the index travels to the device with the batch, and no training step waits for the device
    to find it. The same index, bit for bit, as packed_bert finds from the mask. The head families' losses call
    model(**batch): each head passes the keys it does not take on to its BertModel's forward (the library's **kwargs),
    which make_padding_free replaced with packed_or_padded, the one that reads "real_tokens"."""
    return {**batch, "real_tokens": real_token_index(batch["attention_mask"])}


def packed_attention(attn, x, packing):
    """BertSelfAttention on packed tokens: softmax(Q K^T / sqrt(d) + mask) V over each sequence's own tokens.
    x: (N, H) -> (N, H). Its dropout: scaled_dot_product_attention's (drawn at (B, h, M, M), as the padded model
    draws it), or with MASKS_BF16 the same attention written out, its mask from keep_mask."""
    B, M = packing.shape
    h, d = attn.num_attention_heads, attn.attention_head_size
    q, k, v = (packing.unpack(proj(x)).view(B, M, h, d).transpose(1, 2) for proj in (attn.query, attn.key, attn.value))
    p = attn.dropout.p if attn.training else 0.0
    if packing.mask_draw == MASKS_BF16 and p > 0:
        scores = (q @ k.transpose(-1, -2) * attn.scaling).masked_fill(~packing.key_mask, float("-inf"))   # (B, h, M, M)
        ctx = dropped(torch.softmax(scores, -1), p) @ v
    else:
        ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=packing.key_mask, dropout_p=p, scale=attn.scaling)
    return packing.pack(ctx.transpose(1, 2).reshape(B, M, h * d))                           # (N, H)


def packed_bert(bert, input_ids, attention_mask, token_type_ids, real_tokens=None, mask_draw=MASKS_PADDED):
    """BertModel's forward with every layer but attention on the real tokens only (real_tokens: where they lie, when
    the batch brings it; mask_draw: how its dropout masks are drawn). Returns what BertModel returns: the hidden states T
    as (B, M, H) (zeros at padding) and the pooled [CLS] vector C of each sequence."""
    keep = attention_mask.bool()          # where the batch brings its real tokens (found on the host), they are used
    index = real_tokens if real_tokens is not None else real_token_index(keep)
    packing = Packing(index, tuple(keep.shape), key_mask=keep[:, None, None, :], mask_draw=mask_draw)
    emb = bert.embeddings
    positions = packing.pack(torch.arange(packing.shape[1], device=input_ids.device).expand(packing.shape))
    x = (emb.word_embeddings(packing.pack(input_ids)) + emb.token_type_embeddings(packing.pack(token_type_ids))
         + emb.position_embeddings(positions))          # position ids restart at 0 in each sequence
    x = packing.dropout(emb.LayerNorm(x), emb.dropout.p, emb.training)                     # (N, H)
    if mask_draw == MASKS_BF16:
        x = x.to(torch.bfloat16)        # the hidden states in bf16 from here: each layer's input cast once, not per use
    for layer in bert.encoder.layer:       # each BertLayer, its dropouts in the padded model's order: attention, its output, FFN
        a, out = layer.attention, layer.output
        ctx = packed_attention(a.self, x, packing)
        x = a.output.LayerNorm(packing.dropout(a.output.dense(ctx), a.output.dropout.p, layer.training) + x)
        ffn = layer.intermediate(x)
        x = out.LayerNorm(packing.dropout(out.dense(ffn), out.dropout.p, layer.training) + x)            # (N, H)
    T = packing.unpack(x)                                                                   # (B, M, H)
    C = bert.pooler(T) if bert.pooler is not None else None                                 # tanh(W T_[CLS] + b)
    return BaseModelOutputWithPoolingAndCrossAttentions(last_hidden_state=T, pooler_output=C)


def packed_or_padded(bert, mask_draw, input_ids=None, attention_mask=None, token_type_ids=None, real_tokens=None, **kwargs):
    """The forward of a padding-free BertModel: packed while training on a batch with its attention mask (and where
    its real tokens lie, when the batch brings it: with_real_tokens), its dropout masks drawn as mask_draw says; padded
    otherwise (evaluation, or any input the packing does not compute): its class's own forward. The packed forward
    computes what the other inputs (kwargs) ask for only where that is return_dict=True, which it returns: any other
    input with a value (position_ids, inputs_embeds, output_attentions, output_hidden_states, head_mask, encoder
    states, a cache, ...) takes the padded forward."""
    mask_2d = attention_mask is not None and attention_mask.dim() == 2          # (B, M): 1 at each real token
    packs = all(v is True if k == "return_dict" else v is None or v is False for k, v in kwargs.items())
    if bert.training and packs and mask_2d and input_ids is not None:
        return packed_bert(bert, input_ids, attention_mask,
                           token_type_ids if token_type_ids is not None else torch.zeros_like(input_ids),
                           real_tokens=real_tokens, mask_draw=mask_draw)
    return type(bert).forward(bert, input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, **kwargs)


LAYER_PARTS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.self.dropout",
               "attention.output.dense", "attention.output.LayerNorm", "attention.output.dropout", "intermediate",
               "output.dense", "output.LayerNorm", "output.dropout")
EMBEDDING_PARTS = ("word_embeddings", "position_embeddings", "token_type_embeddings", "LayerNorm", "dropout")


def padding_free_problem(model):
    """Why packed_bert would not compute this model's forward (None when it does): it re-implements BertModel's,
    from these submodules, with absolute positions numbered from 0, hidden states of the embeddings' own size and
    SDPA's or eager's attention (the same softmax(Q K^T * scaling + mask) V), for an encoder only."""
    bert, config = model.base_model, model.config
    if type(bert) is not BertModel:
        return f"model type {config.model_type} ({type(bert).__name__}), and padding-free steps re-implement BertModel's forward"
    attention = config._attn_implementation
    settings = {"position_embedding_type": getattr(config, "position_embedding_type", "absolute") == "absolute",
                "embedding_size": getattr(config, "embedding_size", config.hidden_size) == config.hidden_size,
                f"attention {attention}": attention in ("sdpa", "eager"),
                "is_decoder": not config.is_decoder and not getattr(config, "add_cross_attention", False)}
    off = [name for name, ok in settings.items() if not ok]
    if off:
        return f"its configuration is not the one padding-free steps re-implement ({', '.join(off)})"
    missing = [part for part in EMBEDDING_PARTS if not hasattr(bert.embeddings, part)] + [
        f"layer.{part}" for layer in bert.encoder.layer for names in [dict(layer.named_modules())] for part in LAYER_PARTS
        if part not in names]
    if missing or not all(hasattr(layer.attention.self, "scaling") for layer in bert.encoder.layer):
        return f"its BertModel lacks the parts padding-free steps use ({', '.join(sorted(set(missing))) or 'scaling'})"
    return None


def make_padding_free(model, mask_draw=MASKS_PADDED):
    """From now on the BERT inside model (any head family) trains on the real tokens of each batch only, drawing its
    dropout masks as mask_draw says (dropout_masks: what the run's device and dtype call for); the model's weights, its
    state dict and its saved folder are unchanged. A model whose forward packed_bert does not compute
    (padding_free_problem says why) is returned as it is, with padded steps. Returns model."""
    if padding_free_problem(model) is None:
        bert = model.base_model
        bert.forward = partial(packed_or_padded, bert, mask_draw)
    return model
