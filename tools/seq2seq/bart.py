"""A BART encoder-decoder in plain PyTorch, with Hugging Face's parameter names.

The state_dict of `Bart` *is* an HF BartForConditionalGeneration checkpoint (names
"model.shared.weight", "model.encoder.layers.0.self_attn.q_proj.weight", ..., "lm_head.weight",
"final_logits_bias"). It serves two purposes:
  - training the tiny number-speller (train_numbers.py), in float32;
  - the reference forward for qkv's tests (make_reference.py), in float64, returning every
    attention probability with HF's names: encoder_attentions, decoder_attentions,
    cross_attentions, each a list (one per layer) of [B, H, Lq, Lk].

BART is post-LN (normalize_before = False): every sub-layer is x = LN(x + sublayer(x)), the
embeddings go through layernorm_embedding, the activation is exact GELU (erf), positions are
learned with an offset of 2 (BartLearnedPositionalEmbedding), queries are scaled by
head_dim^-0.5 before q k^T, and logits = x shared^T + final_logits_bias.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: position p reads row p + 2


def bart_config(vocab_size, d_model=128, layers=2, heads=4, ffn=512, max_positions=32,
                pad=0, bos=2, eos=3, decoder_start=2):
    """An HF-style BART config.json dict (post-LN, GELU, learned positions, no embedding scale)."""
    return {
        'architectures': ['BartForConditionalGeneration'],
        'model_type': 'bart',
        'vocab_size': vocab_size,
        'd_model': d_model,
        'encoder_layers': layers,
        'decoder_layers': layers,
        'encoder_attention_heads': heads,
        'decoder_attention_heads': heads,
        'encoder_ffn_dim': ffn,
        'decoder_ffn_dim': ffn,
        'max_position_embeddings': max_positions,
        'activation_function': 'gelu',
        'scale_embedding': False,
        'normalize_before': False,
        'add_final_layer_norm': False,
        'tie_word_embeddings': True,
        'pad_token_id': pad,
        'bos_token_id': bos,
        'eos_token_id': eos,
        'decoder_start_token_id': decoder_start,
        'forced_eos_token_id': eos,
        'dropout': 0.0,
        'attention_dropout': 0.0,
        'activation_dropout': 0.0,
        'init_std': 0.02,
        'torch_dtype': 'float32',
    }


class Attention(nn.Module):
    """BartAttention: q/k/v/out projections (nn.Linear, weight [out, in])."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x, kv, mask):
        """x [B, Lq, E] queries' input, kv [B, Lk, E] keys'/values' input, mask [B or 1, 1, Lq, Lk]
        bool (True = may attend) or None -> (y [B, Lq, E], probs [B, H, Lq, Lk])."""
        B, Lq, E = x.shape
        Lk = kv.shape[1]
        H = self.heads
        D = E // H
        q = (self.q_proj(x) * D ** -0.5).view(B, Lq, H, D).transpose(1, 2)   # [B, H, Lq, D]
        k = self.k_proj(kv).view(B, Lk, H, D).transpose(1, 2)                 # [B, H, Lk, D]
        v = self.v_proj(kv).view(B, Lk, H, D).transpose(1, 2)
        scores = q @ k.transpose(-1, -2)                                      # [B, H, Lq, Lk]
        if mask is not None:
            scores = scores.masked_fill(~mask, float('-inf'))
        probs = torch.softmax(scores, dim=-1)
        y = (probs @ v).transpose(1, 2).reshape(B, Lq, E)
        return self.out_proj(y), probs


class EncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg['d_model']
        self.self_attn = Attention(d, cfg['encoder_attention_heads'])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg['encoder_ffn_dim'])
        self.fc2 = nn.Linear(cfg['encoder_ffn_dim'], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, mask):
        a, probs = self.self_attn(x, x, mask)
        x = self.self_attn_layer_norm(x + a)
        x = self.final_layer_norm(x + self.fc2(F.gelu(self.fc1(x))))
        return x, probs


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg['d_model']
        self.self_attn = Attention(d, cfg['decoder_attention_heads'])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.encoder_attn = Attention(d, cfg['decoder_attention_heads'])
        self.encoder_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg['decoder_ffn_dim'])
        self.fc2 = nn.Linear(cfg['decoder_ffn_dim'], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, enc, self_mask, cross_mask):
        a, self_probs = self.self_attn(x, x, self_mask)
        x = self.self_attn_layer_norm(x + a)
        a, cross_probs = self.encoder_attn(x, enc, cross_mask)
        x = self.encoder_attn_layer_norm(x + a)
        x = self.final_layer_norm(x + self.fc2(F.gelu(self.fc1(x))))
        return x, self_probs, cross_probs


class Stack(nn.Module):
    """BartEncoder / BartDecoder: embed_tokens (tied to shared), embed_positions, layernorm_embedding, layers."""

    def __init__(self, cfg, shared, layer_cls, n_layers):
        super().__init__()
        d = cfg['d_model']
        self.embed_tokens = shared
        self.embed_positions = nn.Embedding(cfg['max_position_embeddings'] + POSITION_OFFSET, d)
        self.layernorm_embedding = nn.LayerNorm(d)
        self.layers = nn.ModuleList([layer_cls(cfg) for _ in range(n_layers)])
        self.embed_scale = math.sqrt(d) if cfg.get('scale_embedding') else 1.0

    def embed(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device) + POSITION_OFFSET
        return self.layernorm_embedding(self.embed_tokens(ids) * self.embed_scale + self.embed_positions(pos)[None])


class BartModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.shared = nn.Embedding(cfg['vocab_size'], cfg['d_model'])
        self.encoder = Stack(cfg, self.shared, EncoderLayer, cfg['encoder_layers'])
        self.decoder = Stack(cfg, self.shared, DecoderLayer, cfg['decoder_layers'])


class Bart(nn.Module):
    """BartForConditionalGeneration: model.*, lm_head (tied to model.shared), final_logits_bias."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = dict(cfg)
        self.model = BartModel(cfg)
        self.register_buffer('final_logits_bias', torch.zeros(1, cfg['vocab_size']))
        std = cfg.get('init_std', 0.02)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)

    def encode(self, ids, pad_mask=None, hidden=None):
        """ids [B, Ls] -> (encoder output [B, Ls, E], encoder_attentions). pad_mask [B, Ls] bool, True = real token.
        hidden: a list to append HF's encoder_hidden_states to (the embeddings after
        layernorm_embedding, then each layer's output; BartEncoder has no final norm)."""
        enc = self.model.encoder
        mask = None if pad_mask is None else pad_mask[:, None, None, :]
        x = enc.embed(ids)
        atts = []
        if hidden is not None:
            hidden.append(x)
        for layer in enc.layers:
            x, p = layer(x, mask)
            atts.append(p)
            if hidden is not None:
                hidden.append(x)
        return x, atts

    def decode(self, dec_ids, enc_out, enc_pad_mask=None, hidden=None):
        """dec_ids [B, Lt], enc_out [B, Ls, E] -> (logits [B, Lt, V], decoder_attentions, cross_attentions).
        hidden: a list to append HF's decoder_hidden_states to (as encode's)."""
        dec = self.model.decoder
        Lt = dec_ids.shape[1]
        causal = torch.tril(torch.ones(Lt, Lt, dtype=torch.bool, device=dec_ids.device))[None, None]
        cross_mask = None if enc_pad_mask is None else enc_pad_mask[:, None, None, :]
        x = dec.embed(dec_ids)
        self_atts, cross_atts = [], []
        if hidden is not None:
            hidden.append(x)
        for layer in dec.layers:
            x, ps, pc = layer(x, enc_out, causal, cross_mask)
            self_atts.append(ps)
            cross_atts.append(pc)
            if hidden is not None:
                hidden.append(x)
        logits = x @ self.model.shared.weight.t() + self.final_logits_bias
        return logits, self_atts, cross_atts

    def forward(self, ids, dec_ids, pad_mask=None):
        """-> dict(logits, encoder_attentions, decoder_attentions, cross_attentions)."""
        enc_out, enc_atts = self.encode(ids, pad_mask)
        logits, self_atts, cross_atts = self.decode(dec_ids, enc_out, pad_mask)
        return {'logits': logits, 'encoder_attentions': enc_atts, 'decoder_attentions': self_atts,
                'cross_attentions': cross_atts}

    @torch.no_grad()
    def greedy(self, ids, max_new):
        """Greedy generation for one input ids [1, Ls] (no cache: the reference)."""
        enc_out, _ = self.encode(ids)
        out = [self.cfg['decoder_start_token_id']]
        for _ in range(max_new):
            logits, _, _ = self.decode(torch.tensor([out], device=ids.device), enc_out)
            nxt = int(torch.argmax(logits[0, -1]))
            out.append(nxt)
            if nxt == self.cfg['eos_token_id']:
                break
        return out[1:]

    def hf_state_dict(self):
        """Tensors under HF's names for a tied BART checkpoint as HF saves it (the tied copies
        model.encoder.embed_tokens / model.decoder.embed_tokens / lm_head dropped)."""
        sd = self.state_dict()
        drop = {'model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight'}
        return {k: v for k, v in sd.items() if k not in drop}

    def load_hf_state_dict(self, tensors):
        sd = dict(tensors)
        shared = sd.get('model.shared.weight')
        for k in ('model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight'):
            sd.setdefault(k, shared)
        sd.pop('lm_head.weight', None)
        sd.setdefault('final_logits_bias', torch.zeros(1, self.cfg['vocab_size']))
        self.load_state_dict(sd, strict=True)
