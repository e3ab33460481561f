-- Argo CD health of an llmkube GPUQuota (inference.llmkube.dev/v1alpha1).
-- Standalone (a quota has no phase): reads the Ready and Stalled conditions the controller writes.
-- Healthy while the quota is enforced, services waiting on it or not (a full quota works as asked);
-- Degraded for an invalid spec (it enforces nothing); Progressing until the status describes the
-- current generation.
local hs = {status = "Progressing", message = "Waiting for the llmkube controller to report status"}
if obj.status == nil or obj.status.conditions == nil then
  return hs
end

local conditions = {}
for _, condition in ipairs(obj.status.conditions) do
  conditions[condition.type] = condition
end

local generation = obj.metadata.generation
local seen = obj.status.observedGeneration
if generation ~= nil and seen ~= nil and seen < generation then
  hs.message = "Waiting for the controller to observe generation " .. generation .. " (status is for " .. seen .. ")"
  return hs
end

local function message_of(type, fallback)
  local condition = conditions[type]
  if condition ~= nil and condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return fallback
end

local stalled = conditions["Stalled"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = message_of("Stalled", "The quota's spec is invalid")
  return hs
end

local ready = conditions["Ready"]
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = message_of("Ready", "Enforced")
  return hs
end
if ready ~= nil then
  hs.message = message_of("Ready", hs.message)
end
return hs
