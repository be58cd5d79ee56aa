// The model page's Export PNG and Export JSON buttons: the shown view as a PNG (export.ts), the
// attention as JSON (contract.ts's toJSON), downloaded.
import type { DemoModel } from './api';
import { toJSON, type AttnData } from './contract';
import { elementToPng } from './export';
import { $, download, message } from './ui';

export interface ExportView { tab: 'head' | 'model' | 'neuron'; layer: number; head: number; model: DemoModel | null; data: AttnData | null }

export function wireExports(view: () => ExportView): void {
  $('#export-png').addEventListener('click', async () => {
    const v = view();
    const target = v.tab === 'head' ? $('#headview') : v.tab === 'model' ? $('#view-model') : $('#neuron');
    const title = `qkv · ${v.model?.name ?? ''} · ${v.tab} view · layer ${v.layer}${v.tab === 'head' ? '' : ` · head ${v.head}`}`;
    try {
      const png = await elementToPng(target, title);
      document.body.dataset.lastPngBytes = String(png.size);
      download(png, `qkv-${v.tab}-view-layer${v.layer}.png`);
    } catch (e) {
      message($('#gen-msg'), `PNG export failed: ${(e as Error).message}`, 'error');
    }
  });
  $('#export-json').addEventListener('click', () => {
    const { data, model } = view();
    if (!data || !model) return;
    const json = toJSON(data, { model: model.name, config: model.config, engine: model.engine, text: model.tokenizer.decode(data.ids) });
    download(new Blob([json], { type: 'application/json' }), 'qkv-attention.json');
  });
}
