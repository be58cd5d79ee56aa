#!/usr/bin/python3
"""A SentencePiece Unigram tokenizer converted to tokenizer.json the way transformers converts
XLM-RoBERTa's (tests/data/tokenizers/kjv-unigram/), and what SentencePiece itself makes of the
test texts (spm-ids.json): the reference for qkv's Unigram model and Precompiled normalizer.

    apt-get install -y python3-sentencepiece
    /usr/bin/python3 tools/model/make_unigram_tokenizer.py

No real XLM-R file ships in an npm package, so one is built: sentencepiece 0.1.97 (Debian)
trains a 1000-piece Unigram model with its default nmt_nfkc normalization rules on 20000 KJV
verses plus the shared tricky texts (tests/js/model-tokenizer-shared.js CORPUS, so their
scripts have pieces), character_coverage 1. The model's normalizer_spec.precompiled_charsmap
(the nmt_nfkc rules compiled to a double-array trie) goes into the file as transformers'
SpmConverter / XLMRobertaConverter write it:
  model       Unigram: <s> <pad> </s> <unk> (XLM-R's fairseq order, unk_id 3), then the
              SentencePiece pieces after its first three (so HF id = spm id + 1), then <mask>
  normalizer  Sequence [Precompiled(charsmap), Strip(right), Replace(" {2,}" -> "\u2581")]
  pre_tokenizer Metaspace(replacement \u2581, prepend_scheme always, split true)
  post_processor <s> $A </s> / <s> $A </s> </s> $B </s>;  decoder Metaspace
spm-ids.json: for each text, SentencePiece's pieces and ids (mapped to the HF ids) without
special tokens.
"""

import base64
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import sentencepiece as spm  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as pb  # noqa: E402
from train_tiny import kjv_text  # noqa: E402

OUT = os.path.join(ROOT, 'tests', 'data', 'tokenizers', 'kjv-unigram')
META = '\u2581'


def corpus():
    js = "import('./tests/js/model-tokenizer-shared.js').then((m) => process.stdout.write(JSON.stringify(m.CORPUS)))"
    return json.loads(subprocess.check_output(['node', '-e', js], cwd=ROOT))


def main():
    texts = corpus()
    verses = [ln.split(' ', 1)[1] for ln in kjv_text().splitlines() if ln[:1].isdigit() and ' ' in ln][:20000]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, 'train.txt'), 'w') as f:
            f.write('\n'.join(verses + [t for t in texts if t.strip()] * 3))
        spm.SentencePieceTrainer.train(input=os.path.join(d, 'train.txt'), model_prefix=os.path.join(d, 'm'),
                                       vocab_size=1000, model_type='unigram', normalization_rule_name='nmt_nfkc',
                                       character_coverage=1.0, num_threads=1, seed_sentencepiece_size=200000,
                                       minloglevel=2)
        proto_bytes = open(os.path.join(d, 'm.model'), 'rb').read()
    proto = pb.ModelProto()
    proto.ParseFromString(proto_bytes)
    sp = spm.SentencePieceProcessor(model_proto=proto_bytes)
    pieces = [(p.piece, p.score) for p in proto.pieces]
    vocab = [['<s>', 0.0], ['<pad>', 0.0], ['</s>', 0.0], ['<unk>', 0.0]] + [[p, s] for p, s in pieces[3:]] + [['<mask>', 0.0]]
    mask_id = len(vocab) - 1
    special = lambda i, c, **kw: {'id': i, 'content': c, 'single_word': False, 'lstrip': kw.get('lstrip', False),
                                  'rstrip': False, 'normalized': False, 'special': True}
    metaspace = {'type': 'Metaspace', 'replacement': META, 'prepend_scheme': 'always', 'split': True}
    tok = {
        'version': '1.0', 'truncation': None, 'padding': None,
        'added_tokens': [special(0, '<s>'), special(1, '<pad>'), special(2, '</s>'), special(3, '<unk>'),
                         special(mask_id, '<mask>', lstrip=True)],
        'normalizer': {'type': 'Sequence', 'normalizers': [
            {'type': 'Precompiled', 'precompiled_charsmap': base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode()},
            {'type': 'Strip', 'strip_left': False, 'strip_right': True},
            {'type': 'Replace', 'pattern': {'Regex': ' {2,}'}, 'content': META}]},
        'pre_tokenizer': metaspace,
        'post_processor': {'type': 'TemplateProcessing',
                           'single': [{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}},
                                      {'SpecialToken': {'id': '</s>', 'type_id': 0}}],
                           'pair': [{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}},
                                    {'SpecialToken': {'id': '</s>', 'type_id': 0}}, {'SpecialToken': {'id': '</s>', 'type_id': 0}},
                                    {'Sequence': {'id': 'B', 'type_id': 0}}, {'SpecialToken': {'id': '</s>', 'type_id': 0}}],
                           'special_tokens': {'<s>': {'id': '<s>', 'ids': [0], 'tokens': ['<s>']},
                                              '</s>': {'id': '</s>', 'ids': [2], 'tokens': ['</s>']}}},
        'decoder': metaspace,
        'model': {'type': 'Unigram', 'unk_id': 3, 'vocab': vocab, 'byte_fallback': False},
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, 'tokenizer.json'), 'w') as f:
        json.dump(tok, f, ensure_ascii=False, indent=None)
        f.write('\n')
    with open(os.path.join(OUT, 'tokenizer_config.json'), 'w') as f:
        json.dump({'tokenizer_class': 'XLMRobertaTokenizer', 'bos_token': '<s>', 'eos_token': '</s>', 'sep_token': '</s>',
                   'cls_token': '<s>', 'unk_token': '<unk>', 'pad_token': '<pad>', 'mask_token': '<mask>',
                   'model_max_length': 512}, f, indent=2)
        f.write('\n')
    hf = lambda i: 3 if i == sp.unk_id() else i + 1
    cases = [{'text': t, 'pieces': sp.encode(t, out_type=str), 'ids': [hf(i) for i in sp.encode(t)]} for t in texts]
    with open(os.path.join(OUT, 'spm-ids.json'), 'w') as f:
        json.dump({'note': 'written by tools/model/make_unigram_tokenizer.py: sentencepiece %s encode(text), ids mapped '
                           'to the tokenizer.json ids (spm id + 1; unk -> 3), no special tokens' % spm.__version__,
                   'cases': cases}, f, ensure_ascii=False, indent=0)
        f.write('\n')
    print('wrote', OUT, len(vocab), 'pieces; charsmap', len(proto.normalizer_spec.precompiled_charsmap), 'bytes')


if __name__ == '__main__':
    main()
