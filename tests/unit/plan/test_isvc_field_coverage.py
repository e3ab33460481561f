"""Every field of the CRD (the contract and the v0.9 additions) has a documented, tested effect.

The table maps each property path under `spec` of the contract schema to the tests that assert its
effect. Kubernetes sub-objects passed on verbatim (env, tolerations, imagePullSecrets, the security
contexts, the probes) are listed as a whole, not field by field. The test fails when the schema
gains a field nobody mapped, when the table names a field the schema does not have, and when a
named test does not exist.
"""

import ast
from pathlib import Path
from typing import Any

from llmkube.api.crds import inferenceservice_schema

HERE = Path(__file__).parent
OPAQUE = {
    "spec.env",
    "spec.tolerations",
    "spec.imagePullSecrets",
    "spec.podSecurityContext",
    "spec.securityContext",
    "spec.probeOverrides.startup",
    "spec.probeOverrides.liveness",
    "spec.probeOverrides.readiness",
    # v0.9: Kubernetes' own types, passed on as written
    "spec.affinity",
    "spec.topologySpreadConstraints",
    "spec.extraVolumes",
    "spec.extraVolumeMounts",
}

LLAMA = "test_isvc_runtime_llamacpp.py::test_llamacpp_flags"
VLLM = "test_isvc_runtime_vllm.py::test_vllm_config_flags"
GOLDEN = "test_isvc_golden.py::test_golden"
MAX_LIFETIME = "test_isvc_v09_fields.py::test_max_pod_lifetime_recycles_the_oldest_expired_pod"
IGNORED = "test_isvc_validation.py::test_warnings_are_reported_and_do_not_block"
SECRET = "test_isvc_runtime_others.py::test_hf_token_secret_ref_passes_name_key_and_optional"
HPA_METRICS = "test_isvc_service_hpa_pvc.py::test_hpa_explicit_metrics_in_order"
HPA_ERRORS = "test_isvc_service_hpa_pvc.py::test_hpa_errors"
QUANTITY_ERRORS = (
    "test_isvc_validation.py::test_errors_fail_the_service_with_field_and_value_and_apply_nothing"
)
RESOURCES = "test_isvc_deployment.py::test_resources"
TGI = "test_isvc_runtime_others.py::test_tgi_flags"
PERSONAPLEX = "test_isvc_runtime_others.py::test_personaplex_args"

EFFECTS: dict[str, list[str]] = {
    "spec.modelRef": [
        "test_isvc_deployment.py::test_model_ref_is_not_in_the_selector_so_it_stays_mutable",
        "test_isvc_status.py::test_every_phase_and_its_conditions",  # the Model gate
    ],
    "spec.runtime": [
        "test_isvc_runtime_others.py::test_runtime_table",
        "test_isvc_deployment.py::test_runtime_label_follows_the_runtime",
        "test_isvc_deployment.py::test_container_name",
    ],
    "spec.replicas": ["test_isvc_deployment.py::test_replicas", "test_isvc_status.py::test_determine_phase"],
    "spec.autoscaling": [
        "test_isvc_service_hpa_pvc.py::test_hpa_intent",
        "test_isvc_plan.py::test_owned_hpa_is_deleted_when_autoscaling_is_removed",
        "test_isvc_status.py::test_desired_with_autoscaling",
    ],
    "spec.autoscaling.maxReplicas": ["test_isvc_service_hpa_pvc.py::test_hpa_intent", HPA_ERRORS],
    "spec.autoscaling.minReplicas": [
        "test_isvc_service_hpa_pvc.py::test_hpa_intent",
        "test_isvc_service_hpa_pvc.py::test_hpa_min_replicas_defaults_to_1",
        HPA_ERRORS,
    ],
    "spec.autoscaling.metrics": [
        "test_isvc_service_hpa_pvc.py::test_hpa_default_metric_per_runtime",
        HPA_METRICS,
    ],
    "spec.autoscaling.metrics.name": [HPA_METRICS],
    "spec.autoscaling.metrics.type": [HPA_METRICS, HPA_ERRORS],
    "spec.autoscaling.metrics.targetAverageValue": [HPA_METRICS, HPA_ERRORS],
    "spec.autoscaling.metrics.targetAverageUtilization": [HPA_METRICS, HPA_ERRORS],
    "spec.image": [
        "test_isvc_deployment.py::test_image",
        QUANTITY_ERRORS,  # required for generic and personaplex
    ],
    "spec.endpoint": ["test_isvc_service_hpa_pvc.py::test_service_type_and_port"],
    "spec.endpoint.port": [
        "test_isvc_service_hpa_pvc.py::test_service_type_and_port",
        "test_isvc_deployment.py::test_container_port_resolution_reaches_port_probes_and_args",
        "test_isvc_service_hpa_pvc.py::test_endpoint_url",
    ],
    "spec.endpoint.path": ["test_isvc_service_hpa_pvc.py::test_endpoint_url"],
    "spec.endpoint.type": ["test_isvc_service_hpa_pvc.py::test_service_type_and_port"],
    "spec.resources": [RESOURCES],
    "spec.resources.gpu": [
        "test_isvc_gpu_priority.py::test_effective_gpu_count",
        "test_isvc_deployment.py::test_strategy_recreate_when_the_gpu_comes_from_the_service",
        RESOURCES,
    ],
    "spec.resources.cpu": [RESOURCES, QUANTITY_ERRORS],
    "spec.resources.memory": [RESOURCES, QUANTITY_ERRORS],
    "spec.resources.hostMemory": [RESOURCES, QUANTITY_ERRORS],
    "spec.resources.gpuMemory": [
        "test_isvc_plan.py::test_gpu_memory_has_no_effect_on_the_workload_when_valid",
        QUANTITY_ERRORS,
    ],
    "spec.tolerations": ["test_isvc_deployment.py::test_tolerations"],
    "spec.nodeSelector": ["test_isvc_deployment.py::test_node_selector_always_applied"],
    "spec.podAnnotations": [
        "test_isvc_deployment.py::test_pod_labels_merge_operator_labels_win_and_annotations_copied"
    ],
    "spec.podLabels": [
        "test_isvc_deployment.py::test_pod_labels_merge_operator_labels_win_and_annotations_copied"
    ],
    "spec.runtimeClassName": [
        "test_isvc_deployment.py::test_runtime_class_and_image_pull_secrets_pass_through"
    ],
    "spec.contextSize": [LLAMA, IGNORED],
    "spec.ropeScaling": [LLAMA, "test_isvc_runtime_llamacpp.py::test_extra_args_win_over_rope_scaling"],
    "spec.ropeScaling.type": [LLAMA],
    "spec.ropeScaling.factor": [LLAMA],
    "spec.ropeScaling.originalContext": [LLAMA],
    "spec.parallelSlots": [
        LLAMA,
        "test_isvc_runtime_vllm.py::test_max_num_seqs",
        TGI,
        "test_isvc_runtime_llamacpp.py::test_extra_args_win_over_parallel",
    ],
    "spec.flashAttention": [LLAMA, IGNORED],
    "spec.jinja": [LLAMA],
    "spec.cacheTypeK": [LLAMA],
    "spec.cacheTypeV": [LLAMA],
    "spec.cacheTypeCustomK": [LLAMA],
    "spec.cacheTypeCustomV": [LLAMA],
    "spec.moeCPUOffload": [LLAMA, "test_isvc_validation.py::test_missing_memory_request_event"],
    "spec.moeCPULayers": [LLAMA],
    "spec.noKvOffload": [LLAMA, "test_isvc_validation.py::test_missing_memory_request_event"],
    "spec.noWarmup": [LLAMA],
    "spec.reasoningBudget": [LLAMA],
    "spec.reasoningBudgetMessage": [LLAMA, IGNORED],
    "spec.metadataOverrides": [LLAMA],
    "spec.tensorOverrides": [LLAMA],
    "spec.batchSize": [LLAMA],
    "spec.uBatchSize": [LLAMA],
    "spec.extraArgs": [
        "test_isvc_runtime_llamacpp.py::test_metrics_last_and_never_duplicated",
        "test_isvc_runtime_vllm.py::test_extra_args_last_verbatim",
        "test_isvc_runtime_others.py::test_tgi_extra_args_are_appended_last",
        IGNORED,
    ],
    "spec.command": ["test_isvc_deployment.py::test_command"],
    "spec.args": ["test_isvc_deployment.py::test_generic_args_and_no_args_key_when_unset", IGNORED],
    "spec.env": [
        "test_isvc_deployment.py::test_env_runtime_first_then_user_and_a_user_entry_replaces_the_generated_one"
    ],
    "spec.containerPort": [
        "test_isvc_deployment.py::test_container_port_resolution_reaches_port_probes_and_args"
    ],
    "spec.probeOverrides": ["test_isvc_deployment.py::test_probe_override_replaces_only_its_probe"],
    "spec.probeOverrides.startup": ["test_isvc_deployment.py::test_probe_override_replaces_only_its_probe"],
    "spec.probeOverrides.liveness": ["test_isvc_deployment.py::test_probe_override_replaces_only_its_probe"],
    "spec.probeOverrides.readiness": ["test_isvc_deployment.py::test_probe_override_replaces_only_its_probe"],
    "spec.skipModelInit": [
        "test_isvc_storage.py::test_no_storage_when_the_runtime_needs_no_model_file_or_init_is_skipped",
        "test_isvc_runtime_llamacpp.py::test_no_model_flag_without_a_model_path",
        "test_isvc_validation.py::test_missing_skip_model_init_event",
    ],
    "spec.personaPlexConfig": [PERSONAPLEX, IGNORED],
    "spec.personaPlexConfig.quantize4Bit": [PERSONAPLEX],
    "spec.personaPlexConfig.cpuOffload": [PERSONAPLEX],
    "spec.personaPlexConfig.hfTokenSecretRef": [
        "test_isvc_runtime_others.py::test_personaplex_env_token_then_no_torch_compile"
    ],
    "spec.personaPlexConfig.hfTokenSecretRef.key": [SECRET],
    "spec.personaPlexConfig.hfTokenSecretRef.name": [SECRET],
    "spec.personaPlexConfig.hfTokenSecretRef.optional": [SECRET],
    "spec.vllmConfig": [VLLM, "test_isvc_runtime_vllm.py::test_config_flag_order", IGNORED],
    "spec.vllmConfig.tensorParallelSize": [
        VLLM,
        "test_isvc_runtime_vllm.py::test_tensor_parallel_from_gpu_count",
    ],
    "spec.vllmConfig.maxModelLen": [VLLM],
    "spec.vllmConfig.quantization": [VLLM],
    "spec.vllmConfig.dtype": [VLLM],
    "spec.vllmConfig.kvCacheDtype": [VLLM, "test_isvc_runtime_vllm.py::test_kv_cache_dtype"],
    "spec.vllmConfig.kvCacheCustomDtype": [VLLM, "test_isvc_runtime_vllm.py::test_kv_cache_dtype"],
    "spec.vllmConfig.enablePrefixCaching": [VLLM],
    "spec.vllmConfig.enableChunkedPrefill": [VLLM],
    "spec.vllmConfig.maxNumBatchedTokens": [VLLM],
    "spec.vllmConfig.attentionBackend": [VLLM],
    "spec.vllmConfig.speculative": [
        "test_isvc_runtime_vllm.py::test_speculative_config_is_json_with_the_draft_model_and_token_count",
        "test_isvc_validation.py::test_vllm_spec_valid",
    ],
    "spec.vllmConfig.speculative.enabled": [VLLM, "test_isvc_validation.py::test_vllm_spec_valid"],
    "spec.vllmConfig.speculative.model": [
        "test_isvc_runtime_vllm.py::test_speculative_config_is_json_with_the_draft_model_and_token_count",
        "test_isvc_validation.py::test_vllm_spec_valid_message_and_non_blocking",
    ],
    "spec.vllmConfig.speculative.numSpeculativeTokens": [
        "test_isvc_runtime_vllm.py::test_speculative_config_is_json_with_the_draft_model_and_token_count",
        "test_isvc_runtime_vllm.py::test_speculative_token_count_defaults_to_the_crd_default",
        "test_isvc_runtime_vllm.py::test_speculative_token_count_omitted_when_null",
    ],
    "spec.vllmConfig.enableExpertParallel": [VLLM],
    "spec.vllmConfig.hfTokenSecretRef": ["test_isvc_runtime_vllm.py::test_hf_token_from_secret"],
    "spec.vllmConfig.hfTokenSecretRef.key": [SECRET, "test_isvc_runtime_vllm.py::test_hf_token_from_secret"],
    "spec.vllmConfig.hfTokenSecretRef.name": [
        SECRET,
        "test_isvc_runtime_vllm.py::test_hf_token_secret_without_optional_or_name",
    ],
    "spec.vllmConfig.hfTokenSecretRef.optional": [
        SECRET,
        "test_isvc_runtime_vllm.py::test_hf_token_from_secret",
    ],
    "spec.vllmConfig.cpuOffloadGB": [VLLM, IGNORED],
    "spec.vllmConfig.gpuMemoryUtilization": [VLLM, IGNORED],
    "spec.tgiConfig": [TGI, IGNORED],
    "spec.tgiConfig.quantize": [TGI],
    "spec.tgiConfig.maxInputLength": [TGI],
    "spec.tgiConfig.maxTotalTokens": [TGI],
    "spec.tgiConfig.dtype": [TGI],
    "spec.tgiConfig.hfTokenSecretRef": ["test_isvc_runtime_others.py::test_tgi_token_env"],
    "spec.tgiConfig.hfTokenSecretRef.key": [SECRET],
    "spec.tgiConfig.hfTokenSecretRef.name": [SECRET],
    "spec.tgiConfig.hfTokenSecretRef.optional": [SECRET],
    "spec.imagePullSecrets": [
        "test_isvc_deployment.py::test_runtime_class_and_image_pull_secrets_pass_through"
    ],
    "spec.priority": [
        "test_isvc_deployment.py::test_priority_class_name_is_always_set",
        "test_isvc_validation.py::test_effective_priority_is_the_observed_value",
    ],
    "spec.priorityClassName": [
        "test_isvc_gpu_priority.py::test_priority_class_name",
        "test_isvc_validation.py::test_existing_custom_priority_class_is_used",
        QUANTITY_ERRORS,  # an unknown class fails the service
    ],
    # Read only by the metal-agent's eviction watchdog: the plan does not change.
    "spec.evictionProtection": ["test_isvc_plan.py::test_eviction_protection_has_no_effect_on_the_plan"],
    "spec.podSecurityContext": [
        "test_isvc_deployment.py::test_pod_security_context",
        "test_isvc_storage.py::test_init_container_security_context",
    ],
    "spec.securityContext": ["test_isvc_deployment.py::test_container_security_context"],
    # -- v0.9 (test_isvc_v09_fields.py) --
    "spec.mode": [
        "test_isvc_v09_fields.py::test_mode_flags_for_llamacpp_and_the_status_mode",
        "test_isvc_v09_fields.py::test_mode_for_vllm_and_sglang",
        "test_isvc_v09_fields.py::test_the_serving_mode_is_ignored_by_runtimes_without_one",
    ],
    "spec.suspend": [
        "test_isvc_v09_fields.py::test_suspend_scales_to_zero_keeps_replicas_and_says_suspended",
        "test_isvc_v09_fields.py::test_suspend_removes_the_hpa_and_resuming_restores_it",
    ],
    "spec.revisionHistoryLimit": ["test_isvc_v09_fields.py::test_revision_history_limit"],
    "spec.topologySpreadConstraints": [
        "test_isvc_v09_fields.py::test_topology_spread_constraints_and_affinity_reach_the_pod_as_written"
    ],
    "spec.affinity": [
        "test_isvc_v09_fields.py::test_topology_spread_constraints_and_affinity_reach_the_pod_as_written",
        "test_isvc_v09_fields.py::test_control_plane_placement_is_refused_unless_allowed",
    ],
    "spec.speculativeDecoding": ["test_isvc_v09_fields.py::test_speculative_decoding_with_a_companion_file"],
    "spec.speculativeDecoding.type": [
        "test_isvc_v09_fields.py::test_speculative_types_without_weights",
        "test_isvc_v09_fields.py::test_speculative_decoding_on_vllm_and_a_runtime_without_it",
    ],
    "spec.speculativeDecoding.draftModelRef": [
        "test_isvc_v09_fields.py::test_speculative_decoding_from_a_second_model_adds_its_downloader",
        "test_isvc_v09_fields.py::test_speculative_decoding_waits_for_a_missing_draft_model_in_status",
    ],
    "spec.speculativeDecoding.draftModel": [
        "test_isvc_v09_fields.py::test_speculative_decoding_with_a_companion_file"
    ],
    "spec.speculativeDecoding.nDraftMax": [
        "test_isvc_v09_fields.py::test_speculative_decoding_with_a_companion_file"
    ],
    "spec.speculativeDecoding.pMin": [
        "test_isvc_v09_fields.py::test_speculative_decoding_with_a_companion_file"
    ],
    "spec.turboQuantBits": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.pagedSSDCacheDir": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.hotCacheMaxSize": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.pagedSSDCacheMaxSize": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.extraVolumes": [
        "test_isvc_v09_fields.py::test_extra_volumes_and_mounts_come_after_the_models",
        "test_isvc_v09_fields.py::test_volumes_the_admin_did_not_allow_are_policy_violations",
    ],
    "spec.extraVolumeMounts": [
        "test_isvc_v09_fields.py::test_extra_volumes_and_mounts_come_after_the_models",
        "test_isvc_v09_fields.py::test_an_extra_mount_of_no_volume_is_refused_naming_it",
    ],
    "spec.bindAddress": [
        "test_isvc_v09_fields.py::test_bind_address_is_the_servers_host_unless_extra_args_say",
        "test_isvc_v09_fields.py::test_bind_address_for_vllm_tgi_and_sglang",
    ],
    "spec.modelCache": ["test_isvc_v09_fields.py::test_model_cache_is_ignored_without_a_download"],
    "spec.modelCache.persistence": [
        "test_isvc_v09_fields.py::test_model_cache_ephemeral_sized_by_ephemeral_storage"
    ],
    "spec.modelCache.claimName": [
        "test_isvc_v09_fields.py::test_model_cache_claim_name_caches_in_the_users_claim",
        "test_isvc_v09_fields.py::test_a_claim_name_of_another_namespace_is_refused",
    ],
    "spec.sglangConfig": [
        "test_isvc_v09_fields.py::test_sglang_as_the_reference_plans_it",
        "test_isvc_v09_fields.py::test_sglang_config_flags",
    ],
    "spec.disruption": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.disruption.protectStartup": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.disruption.protectAlways": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.rolloutPolicy": ["test_isvc_v09_fields.py::test_rollout_policy_wait_for_idle_drains_each_old_pod"],
    "spec.rolloutPolicy.waitForIdle": [
        "test_isvc_v09_fields.py::test_rollout_policy_wait_for_idle_drains_each_old_pod",
        "test_isvc_v09_fields.py::test_rollout_policy_without_wait_or_with_force_does_not_drain",
    ],
    "spec.rolloutPolicy.idleTimeoutSeconds": [
        "test_isvc_v09_fields.py::test_rollout_policy_wait_for_idle_drains_each_old_pod"
    ],
    "spec.rolloutPolicy.force": [
        "test_isvc_v09_fields.py::test_rollout_policy_without_wait_or_with_force_does_not_drain"
    ],
    "spec.maxPodLifetimeSeconds": [MAX_LIFETIME],
    "spec.maxPodLifetimeIdleTimeoutSeconds": [
        "test_isvc_v09_fields.py::test_max_pod_lifetime_idle_timeout_is_reported_without_effect"
    ],
    "spec.endpoint.nodePort": [
        "test_isvc_v09_fields.py::test_node_port_pins_the_service_port_where_node_ports_are_allowed",
        "test_isvc_v09_fields.py::test_node_port_is_a_policy_violation_where_node_ports_are_not_allowed",
        "test_isvc_v09_fields.py::test_node_port_needs_a_service_type_with_one",
    ],
    "spec.resources.ephemeralStorage": [
        "test_isvc_v09_fields.py::test_model_cache_ephemeral_sized_by_ephemeral_storage"
    ],
    "spec.slo": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.slo.name": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.slo.objective": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.slo.window": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.slo.indicator": ["test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"],
    "spec.slo.latencyThreshold": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway.enabled": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway.gatewayRef": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway.gatewayRef.name": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway.gatewayRef.namespace": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.endpoint.gateway.modelName": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.resources.gpuSharing": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.resources.gpuSharing.mode": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.resources.gpuSharing.profile": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.resources.gpuSharing.memoryLimitGiB": [
        "test_isvc_v09_fields.py::test_fields_without_effect_here_are_kept_and_reported"
    ],
    "spec.sglangConfig.tensorParallelSize": [
        "test_isvc_v09_fields.py::test_sglang_config_flags",
        "test_isvc_v09_fields.py::test_sglang_takes_the_tensor_parallelism_from_the_gpu_count",
    ],
    "spec.sglangConfig.expertParallelSize": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.dataParallelSize": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.contextLength": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.memFractionStatic": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.chunkedPrefillSize": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.maxRunningRequests": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.quantization": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.kvCacheDtype": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.kvCacheCustomDtype": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.attentionBackend": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.enablePrefixCaching": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.toolCallParser": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.reasoningParser": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.chatTemplate": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.enabled": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.algorithm": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.draftModelPath": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.numSteps": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.eagleTopK": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.numDraftTokens": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.speculative.acceptThresholdSingle": [
        "test_isvc_v09_fields.py::test_sglang_config_flags"
    ],
    "spec.sglangConfig.speculative.acceptThresholdAcc": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.loraModules": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.maxLoraRank": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.loraTargetModules": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.loraAdapters": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.loraAdapters.name": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.loraAdapters.path": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.logLevel": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.trustRemoteCode": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.skipTokenizerInit": ["test_isvc_v09_fields.py::test_sglang_config_flags"],
    "spec.sglangConfig.hfTokenSecretRef": [
        "test_isvc_v09_fields.py::test_sglang_hf_token_and_gpu_only_memory_fraction"
    ],
    "spec.sglangConfig.hfTokenSecretRef.key": [
        "test_isvc_v09_fields.py::test_sglang_hf_token_and_gpu_only_memory_fraction"
    ],
    "spec.sglangConfig.hfTokenSecretRef.name": [
        "test_isvc_v09_fields.py::test_sglang_hf_token_and_gpu_only_memory_fraction"
    ],
    "spec.sglangConfig.hfTokenSecretRef.optional": [
        "test_isvc_v09_fields.py::test_sglang_hf_token_and_gpu_only_memory_fraction"
    ],
}
# The golden files exercise many fields at once; they are listed for the reader, not required.
SEE_ALSO = [GOLDEN]


def schema_paths() -> list[str]:
    def walk(node: dict[str, Any], path: str) -> list[str]:
        found = [path]
        if path in OPAQUE:
            return found
        props = node.get("properties") or (node.get("items") or {}).get("properties") or {}
        for name, child in props.items():
            found += walk(child, f"{path}.{name}")
        return found

    return walk(inferenceservice_schema()["properties"]["spec"], "spec")[1:]


def test_every_spec_field_has_a_tested_effect() -> None:
    paths = set(schema_paths())
    missing = sorted(paths - set(EFFECTS))
    stale = sorted(set(EFFECTS) - paths)
    assert not missing, f"fields with no mapped test: {missing}"
    assert not stale, f"mapped fields not in the schema: {stale}"
    assert all(EFFECTS[path] for path in paths)


def test_every_mapped_test_exists() -> None:
    functions: dict[str, set[str]] = {}
    for ref in {ref for refs in EFFECTS.values() for ref in refs} | set(SEE_ALSO):
        file, _, name = ref.partition("::")
        if file not in functions:
            tree = ast.parse((HERE / file).read_text())
            functions[file] = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in functions[file], ref
