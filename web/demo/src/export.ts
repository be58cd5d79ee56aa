// PNG export of whatever a view shows: every <svg> and <canvas> inside the element (plus the
// text of elements marked .export-text) is drawn at its on-screen position onto one canvas.
// SVGs are serialised (XMLSerializer) and rasterised through an <img>.

async function svgToImage(svg: SVGSVGElement): Promise<HTMLImageElement> {
  const clone = svg.cloneNode(true) as SVGSVGElement;
  const r = svg.getBoundingClientRect();
  clone.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  clone.setAttribute('width', String(r.width));
  clone.setAttribute('height', String(r.height));
  const text = new XMLSerializer().serializeToString(clone);
  const url = URL.createObjectURL(new Blob([text], { type: 'image/svg+xml;charset=utf-8' }));
  try {
    const img = new Image();
    img.decoding = 'sync';
    await new Promise<void>((ok, fail) => { img.onload = () => ok(); img.onerror = () => fail(new Error('export: the SVG could not be rasterised')); img.src = url; });
    return img;
  } finally {
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
}

/** Rasterises `root` to a PNG Blob (2x for crisp text). */
export async function elementToPng(root: HTMLElement, title?: string): Promise<Blob> {
  const box = root.getBoundingClientRect();
  const pad = 12, titleH = title ? 24 : 0;
  const scale = 2;
  const canvas = document.createElement('canvas');
  const W = Math.max(1, Math.ceil(Math.max(box.width, root.scrollWidth))) + 2 * pad;
  const H = Math.max(1, Math.ceil(Math.max(box.height, root.scrollHeight))) + 2 * pad + titleH;
  canvas.width = W * scale; canvas.height = H * scale;
  const ctx = canvas.getContext('2d')!;
  ctx.scale(scale, scale);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, H);
  if (title) { ctx.fillStyle = '#1b1b1f'; ctx.font = '600 14px system-ui, sans-serif'; ctx.fillText(title, pad, pad + 14); }
  const ox = pad - box.left + root.scrollLeft, oy = pad + titleH - box.top + root.scrollTop;
  const items = [...root.querySelectorAll<HTMLElement | SVGSVGElement>('svg, canvas, .export-text')].filter((e) => !e.parentElement?.closest('svg'));
  for (const el of items) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (el instanceof HTMLCanvasElement) {
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(el, r.left + ox, r.top + oy, r.width, r.height);
    } else if (el instanceof SVGSVGElement) {
      ctx.drawImage(await svgToImage(el), r.left + ox, r.top + oy, r.width, r.height);
    } else {
      const cs = getComputedStyle(el);
      ctx.fillStyle = cs.color; ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      ctx.fillText(el.textContent ?? '', r.left + ox, r.top + oy + r.height * 0.8);
    }
  }
  return new Promise((ok, fail) => canvas.toBlob((b) => (b ? ok(b) : fail(new Error('export: canvas.toBlob failed'))), 'image/png'));
}
