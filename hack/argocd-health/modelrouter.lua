-- Argo CD health of an llmkube ModelRouter (inference.llmkube.dev/v1alpha1).
-- #include prelude.lua
-- Degraded: the router serves, but a backend InferenceService is missing or not Ready (the Ready
-- condition stays True, reason BackendsNotReady, and names them).
if phase == "Degraded" then
  hs.status = "Degraded"
  hs.message = message_of("Ready", "A backend is not ready")
  return hs
end

local ready = conditions["Ready"]
if phase == "Ready" and (ready == nil or ready.status == "True") then
  hs.status = "Healthy"
  hs.message = message_of("Ready", "Ready")
  return hs
end

-- Pending, Provisioning (the router's Deployment has no available replica for this spec yet).
if ready ~= nil and ready.reason ~= nil then
  hs.message = ready.reason .. ": " .. message_of("Ready", message_of("Reconciling", phase))
  return hs
end
hs.message = phase .. ": " .. message_of("Reconciling", phase)
return hs
