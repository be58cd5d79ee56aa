"""BERT and DistilBERT encoders with their masked-LM heads, in plain PyTorch.

Module and parameter names follow Hugging Face's BertForMaskedLM and DistilBertForMaskedLM,
so `state_dict()` *is* an HF checkpoint (the tied decoder weight is left out on export, as
HF does). Used by train_bert.py (training, float32) and make_bert_reference.py (the float64
reference forward the C++/wasm encoder is tested against).

Both are post-LN encoders:  x = LN(x + Attn(x));  x = LN(x + W2 gelu(W1 x)).
GELU is the exact erf form (HF "gelu"). The attention mask is additive: keys whose
attention_mask is 0 get the dtype's most negative finite value, as HF does.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def bert_config(vocab_size, hidden=128, layers=2, heads=4, intermediate=512, max_pos=128, type_vocab=2):
    return {
        'architectures': ['BertForMaskedLM'], 'model_type': 'bert',
        'vocab_size': vocab_size, 'hidden_size': hidden, 'num_hidden_layers': layers,
        'num_attention_heads': heads, 'intermediate_size': intermediate, 'hidden_act': 'gelu',
        'hidden_dropout_prob': 0.1, 'attention_probs_dropout_prob': 0.1,
        'max_position_embeddings': max_pos, 'type_vocab_size': type_vocab,
        'initializer_range': 0.02, 'layer_norm_eps': 1e-12, 'pad_token_id': 0,
        'position_embedding_type': 'absolute', 'tie_word_embeddings': True,
    }


def distilbert_config(vocab_size, dim=96, layers=2, heads=4, hidden_dim=256, max_pos=64):
    return {
        'architectures': ['DistilBertForMaskedLM'], 'model_type': 'distilbert',
        'vocab_size': vocab_size, 'dim': dim, 'n_layers': layers, 'n_heads': heads,
        'hidden_dim': hidden_dim, 'activation': 'gelu', 'dropout': 0.1, 'attention_dropout': 0.1,
        'max_position_embeddings': max_pos, 'sinusoidal_pos_embds': False,
        'initializer_range': 0.02, 'pad_token_id': 0, 'tie_weights_': True,
    }


def additive_mask(attention_mask, dtype):
    """[B, L] of 1/0 -> [B, 1, 1, L] of 0 / most-negative (HF's extended attention mask)."""
    m = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - m) * torch.finfo(dtype).min


def self_attention(x, q_lin, k_lin, v_lin, n_heads, mask_add, drop_p, training):
    """x [B, L, E] -> context [B, L, E], probabilities [B, H, L, L]. No causal mask."""
    B, L, E = x.shape
    D = E // n_heads
    split = lambda t: t.view(B, L, n_heads, D).transpose(1, 2)           # [B, H, L, D]
    q, k, v = split(q_lin(x)), split(k_lin(x)), split(v_lin(x))
    scores = q @ k.transpose(-1, -2) / math.sqrt(D) + mask_add         # [B, H, L, L]
    probs = torch.softmax(scores, dim=-1)
    ctx = F.dropout(probs, drop_p, training) @ v                        # [B, H, L, D]
    return ctx.transpose(1, 2).reshape(B, L, E), probs


# ----------------------------------------------------------------------------- BERT

class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c['vocab_size'], c['hidden_size'])
        self.position_embeddings = nn.Embedding(c['max_position_embeddings'], c['hidden_size'])
        self.token_type_embeddings = nn.Embedding(c['type_vocab_size'], c['hidden_size'])
        self.LayerNorm = nn.LayerNorm(c['hidden_size'], eps=c['layer_norm_eps'])
        self.p = c['hidden_dropout_prob']

    def forward(self, ids, types, pos=None):
        if pos is None:
            pos = torch.arange(ids.shape[1])[None]
        e = self.word_embeddings(ids) + self.token_type_embeddings(types) + self.position_embeddings(pos)
        return F.dropout(self.LayerNorm(e), self.p, self.training)


class _Self(nn.Module):
    def __init__(self, E):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)


class _DenseLN(nn.Module):
    def __init__(self, n_in, E, eps):
        super().__init__()
        self.dense = nn.Linear(n_in, E)
        self.LayerNorm = nn.LayerNorm(E, eps=eps)


class _Attention(nn.Module):
    def __init__(self, E, eps):
        super().__init__()
        self.self = _Self(E)
        self.output = _DenseLN(E, E, eps)


class _Intermediate(nn.Module):
    def __init__(self, E, I):
        super().__init__()
        self.dense = nn.Linear(E, I)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        E, eps = c['hidden_size'], c['layer_norm_eps']
        self.attention = _Attention(E, eps)
        self.intermediate = _Intermediate(E, c['intermediate_size'])
        self.output = _DenseLN(c['intermediate_size'], E, eps)
        self.H, self.p, self.pa = c['num_attention_heads'], c['hidden_dropout_prob'], c['attention_probs_dropout_prob']

    def forward(self, x, mask_add):
        s = self.attention.self
        ctx, probs = self_attention(x, s.query, s.key, s.value, self.H, mask_add, self.pa, self.training)
        o = self.attention.output
        x = o.LayerNorm(x + F.dropout(o.dense(ctx), self.p, self.training))
        h = F.gelu(self.intermediate.dense(x))
        x = self.output.LayerNorm(x + F.dropout(self.output.dense(h), self.p, self.training))
        return x, probs


class _Encoder(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layer = nn.ModuleList(layers)


class BertModel(nn.Module):
    """HF's BertModel without the pooler: names embeddings.*, encoder.layer.N.* (what a
    sentence-transformers checkpoint holds, beside pooler.dense.*)."""

    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = _Encoder([BertLayer(c) for _ in range(c['num_hidden_layers'])])

    def forward(self, ids, token_type_ids=None, attention_mask=None, position_ids=None, hidden=None):
        """-> last hidden states [B, L, E], [attention probabilities [B, H, L, L] per layer].
        hidden: a list to append HF's hidden_states to (the embeddings' output, then each layer's)."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        x = self.embeddings(ids, token_type_ids, position_ids)
        mask_add = additive_mask(attention_mask, x.dtype)
        atts = []
        if hidden is not None:
            hidden.append(x)
        for layer in self.encoder.layer:
            x, p = layer(x, mask_add)
            atts.append(p)
            if hidden is not None:
                hidden.append(x)
        return x, atts


class _Transform(nn.Module):
    def __init__(self, E, eps):
        super().__init__()
        self.dense = nn.Linear(E, E)
        self.LayerNorm = nn.LayerNorm(E, eps=eps)


class _Predictions(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = _Transform(c['hidden_size'], c['layer_norm_eps'])
        self.bias = nn.Parameter(torch.zeros(c['vocab_size']))


class _Cls(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = _Predictions(c)


class BertForMaskedLM(nn.Module):
    """state_dict names: bert.embeddings.*, bert.encoder.layer.N.*, cls.predictions.*.
    The decoder is tied to bert.embeddings.word_embeddings.weight."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        self.bert = BertModel(c)
        self.cls = _Cls(c)
        self.apply(lambda m: _init(m, c['initializer_range']))

    def forward(self, ids, token_type_ids=None, attention_mask=None, head=True, hidden=None):
        """-> logits [B, L, V] (hidden [B, L, E] if not head), [attention probabilities [B, H, L, L] per layer].
        hidden: a list to append HF's hidden_states to (the embeddings' output, then each layer's)."""
        x, atts = self.bert(ids, token_type_ids, attention_mask, None, hidden)
        return (self.head(x) if head else x), atts

    def head(self, x):
        """The MLM head: hidden [..., E] -> logits [..., V] (decoder tied to the word embeddings)."""
        t = self.cls.predictions.transform
        h = t.LayerNorm(F.gelu(t.dense(x)))
        return h @ self.bert.embeddings.word_embeddings.weight.T + self.cls.predictions.bias


# ----------------------------------------------------------------------------- RoBERTa

def roberta_config(vocab_size, hidden=64, layers=2, heads=4, intermediate=96, max_tokens=32, pad=1,
                   model_type='roberta'):
    """HF RobertaConfig / XLMRobertaConfig keys: positions padding_idx + 1 .. (max_tokens more)."""
    c = bert_config(vocab_size, hidden, layers, heads, intermediate, max_tokens + pad + 1, type_vocab=1)
    c.update({'architectures': ['XLMRobertaForMaskedLM' if model_type == 'xlm-roberta' else 'RobertaForMaskedLM'],
              'model_type': model_type, 'pad_token_id': pad, 'bos_token_id': 0, 'eos_token_id': 2,
              'layer_norm_eps': 1e-5})
    return c


def roberta_position_ids(ids, pad):
    """HF's create_position_ids_from_input_ids: pad tokens at pad, the others pad + 1, pad + 2, ..."""
    m = ids.ne(pad).long()
    return torch.cumsum(m, dim=1) * m + pad


class _LmHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c['hidden_size'], c['hidden_size'])
        self.layer_norm = nn.LayerNorm(c['hidden_size'], eps=c['layer_norm_eps'])
        self.bias = nn.Parameter(torch.zeros(c['vocab_size']))


class RobertaForMaskedLM(nn.Module):
    """state_dict names: roberta.embeddings.*, roberta.encoder.layer.N.*, lm_head.{dense,layer_norm,bias};
    the decoder tied to the word embeddings. Serves XLMRobertaForMaskedLM too (the same module)."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        self.roberta = BertModel(c)
        self.lm_head = _LmHead(c)
        self.apply(lambda m: _init(m, c['initializer_range']))

    def forward(self, ids, token_type_ids=None, attention_mask=None, head=True, hidden=None):
        pos = roberta_position_ids(ids, self.cfg['pad_token_id'])
        x, atts = self.roberta(ids, token_type_ids, attention_mask, pos, hidden)
        return (self.head(x) if head else x), atts

    def head(self, x):
        """The MLM head lm_head: hidden [..., E] -> logits [..., V]."""
        h = self.lm_head.layer_norm(F.gelu(self.lm_head.dense(x)))
        return h @ self.roberta.embeddings.word_embeddings.weight.T + self.lm_head.bias


# ----------------------------------------------------------------------------- DistilBERT

class _DEmb(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c['vocab_size'], c['dim'])
        self.position_embeddings = nn.Embedding(c['max_position_embeddings'], c['dim'])
        self.LayerNorm = nn.LayerNorm(c['dim'], eps=1e-12)


class _DAttn(nn.Module):
    def __init__(self, E):
        super().__init__()
        self.q_lin, self.k_lin, self.v_lin, self.out_lin = (nn.Linear(E, E) for _ in range(4))


class _Ffn(nn.Module):
    def __init__(self, E, I):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(E, I), nn.Linear(I, E)


class DistilLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        E = c['dim']
        self.attention = _DAttn(E)
        self.sa_layer_norm = nn.LayerNorm(E, eps=1e-12)
        self.ffn = _Ffn(E, c['hidden_dim'])
        self.output_layer_norm = nn.LayerNorm(E, eps=1e-12)
        self.H = c['n_heads']

    def forward(self, x, mask_add):
        a = self.attention
        ctx, probs = self_attention(x, a.q_lin, a.k_lin, a.v_lin, self.H, mask_add, 0.0, False)
        x = self.sa_layer_norm(x + a.out_lin(ctx))
        x = self.output_layer_norm(x + self.ffn.lin2(F.gelu(self.ffn.lin1(x))))
        return x, probs


class _Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([DistilLayer(c) for _ in range(c['n_layers'])])


class _Distil(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = _DEmb(c)
        self.transformer = _Transformer(c)


class DistilBertForMaskedLM(nn.Module):
    """state_dict names: distilbert.embeddings.*, distilbert.transformer.layer.N.*,
    vocab_transform, vocab_layer_norm, vocab_projector (weight tied to the word embeddings)."""

    def __init__(self, c):
        super().__init__()
        self.cfg = c
        self.distilbert = _Distil(c)
        self.vocab_transform = nn.Linear(c['dim'], c['dim'])
        self.vocab_layer_norm = nn.LayerNorm(c['dim'], eps=1e-12)
        self.vocab_projector_bias = nn.Parameter(torch.zeros(c['vocab_size']))
        self.apply(lambda m: _init(m, c['initializer_range']))

    def forward(self, ids, token_type_ids=None, attention_mask=None, hidden=None):
        """hidden: a list to append HF's hidden_states to (the embeddings' output, then each layer's)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        e = self.distilbert.embeddings
        pos = torch.arange(ids.shape[1])[None]
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos))
        mask_add = additive_mask(attention_mask, x.dtype)
        atts = []
        if hidden is not None:
            hidden.append(x)
        for layer in self.distilbert.transformer.layer:
            x, p = layer(x, mask_add)
            atts.append(p)
            if hidden is not None:
                hidden.append(x)
        return self.head(x), atts

    def head(self, x):
        """The MLM head (vocab_transform, GELU, vocab_layer_norm, vocab_projector): [..., E] -> [..., V]."""
        h = self.vocab_layer_norm(F.gelu(self.vocab_transform(x)))
        return h @ self.distilbert.embeddings.word_embeddings.weight.T + self.vocab_projector_bias

    def hf_state_dict(self):
        sd = {k: v for k, v in self.state_dict().items() if k != 'vocab_projector_bias'}
        sd['vocab_projector.bias'] = self.vocab_projector_bias.detach()
        return sd


def _init(m, std):
    if isinstance(m, (nn.Linear, nn.Embedding)):
        nn.init.normal_(m.weight, std=std)
    if isinstance(m, nn.Linear):
        nn.init.zeros_(m.bias)
    if isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


def hf_state_dict(model):
    """The checkpoint as HF saves it (tied decoder left out)."""
    if isinstance(model, DistilBertForMaskedLM):
        return model.hf_state_dict()
    return dict(model.state_dict())


def from_hf_state_dict(cfg, tensors):
    """A model built from config + {name: tensor}; accepts the LayerNorm.gamma/beta spelling."""
    fix = {}
    for k, v in tensors.items():
        k = k.replace('LayerNorm.gamma', 'LayerNorm.weight').replace('LayerNorm.beta', 'LayerNorm.bias')
        fix[k] = v
    if cfg['model_type'] == 'distilbert':
        m = DistilBertForMaskedLM(cfg)
        fix['vocab_projector_bias'] = fix.pop('vocab_projector.bias')
        fix.pop('vocab_projector.weight', None)
    else:
        m = BertForMaskedLM(cfg)
        fix.pop('cls.predictions.decoder.weight', None)
        fix.pop('cls.predictions.decoder.bias', None)
        for k in [k for k in fix if k.startswith('bert.pooler.') or k.startswith('cls.seq_relationship.')]:
            fix.pop(k)
    m.load_state_dict(fix, strict=True)
    m.eval()
    return m
