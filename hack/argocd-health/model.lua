-- Argo CD health of an llmkube Model (inference.llmkube.dev/v1alpha1).
-- #include prelude.lua
local ready = conditions["Ready"]
if phase == "Ready" and (ready == nil or ready.status == "True") then
  hs.status = "Healthy"
  hs.message = message_of("Ready", message_of("Available", "Ready"))
  return hs
end

-- Pending, Downloading, Copying, and Ready while a Ready condition still says False.
if ready ~= nil and ready.reason ~= nil then  -- e.g. "RollingOut: Rolling out the current spec: 1/2 replicas updated"
  hs.message = ready.reason .. ": " .. message_of("Ready", message_of("Progressing", phase))
  return hs
end
hs.message = phase .. ": " .. message_of("Progressing", message_of("Available", phase))
return hs
