/**
 * Measures over what a model's forward pass returns: attention rollout and attention flow
 * (Abnar & Zuidema 2020) and per-head probes (previous-token, induction, sink, entropy,
 * ablation effect).
 */
export { type HeadFusion } from './fuse.js';
export { isCausalMap } from './causal.js';
export { attentionRollout, attentionRolloutSync, type RolloutOptions } from './rollout.js';
export { attentionFlow, attentionFlowSync, FLOW_MAX_LENGTH, type FlowOptions, type FlowAsyncOptions } from './flow.js';
export { headPatternScores, inductionScores, type HeadPatternScores, type HeadTable } from './head-scores.js';
export {
  headProbes, nextTokenLoss, type HeadProbeOptions, type HeadProbeResult, type HeadScore, type ProbeModel, type ProbeProgress,
  type ProbeForwardOptions, type ProbeForwardResult, type ProbeTokenizer, type ProbeDims,
} from './probes.js';
