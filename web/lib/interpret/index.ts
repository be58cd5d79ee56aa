/**
 * Measures over what a model's forward pass returns: attention rollout and attention flow
 * (Abnar & Zuidema 2020) and per-head probes (previous-token, induction, sink, entropy,
 * ablation effect); over the residual stream the logit lens, direct logit attribution, activation
 * patching sweeps and steering vectors.
 */
export { type HeadFusion } from './fuse.js';
export { isCausalMap } from './causal.js';
export { attentionRollout, attentionRolloutSync, type RolloutOptions } from './rollout.js';
export { attentionFlow, attentionFlowSync, FLOW_MAX_LENGTH, type FlowOptions, type FlowAsyncOptions } from './flow.js';
export { headPatternScores, inductionScores, type HeadPatternScores, type HeadTable } from './head-scores.js';
export { logitLens, type LensCell, type LensToken, type LogitLensOptions, type LogitLensResult } from './lens.js';
export { logitAttribution, type LogitAttributionOptions, type LogitAttributionResult, type AttributionPart } from './attribution.js';
export { activationPatching, type ActivationPatchingOptions, type ActivationPatchingResult, type PatchingOver } from './patching.js';
export { steeringVector, type SteeringVectorOptions } from './steering.js';
export {
  headProbes, nextTokenLoss, type HeadProbeOptions, type HeadProbeResult, type HeadScore, type ProbeModel, type ProbeProgress,
  type ProbeForwardOptions, type ProbeForwardResult, type ProbeTokenizer, type ProbeDims,
} from './probes.js';
