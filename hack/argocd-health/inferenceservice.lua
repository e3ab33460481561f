-- Argo CD health of an llmkube InferenceService (inference.llmkube.dev/v1alpha1).
-- #include prelude.lua
if phase == "Stopped" then
  hs.status = "Suspended"
  hs.message = message_of("Available", "Scaled to zero: spec.replicas is 0")
  return hs
end

local ready = conditions["Ready"]
if phase == "Ready" and (ready == nil or ready.status == "True") then
  hs.status = "Healthy"
  hs.message = message_of("Ready", message_of("Available", "Ready"))
  if obj.status.endpoint ~= nil and obj.status.endpoint ~= "" then
    hs.message = hs.message .. " at " .. obj.status.endpoint
  end
  return hs
end

if phase == "WaitingForGPU" then
  hs.message = message_of("Progressing", "Waiting for GPU resources")
  return hs
end

-- Pending, Creating, Progressing, and Ready while a Ready condition still says False.
if ready ~= nil and ready.reason ~= nil then  -- e.g. "RollingOut: Rolling out the current spec: 1/2 replicas updated"
  hs.message = ready.reason .. ": " .. message_of("Ready", message_of("Progressing", phase))
  return hs
end
hs.message = phase .. ": " .. message_of("Progressing", message_of("Available", phase))
return hs
