-- Reads status.phase and the conditions: Ready (True only when the current spec is served), Stalled
-- and Degraded (failed), then Progressing/Available for older controllers that wrote no Ready. A
-- status that describes an older generation than the spec is Progressing, whatever it says.
local hs = {status = "Progressing", message = "Waiting for the llmkube controller to report status"}
if obj.status == nil or obj.status.phase == nil then
  return hs
end

local conditions = {}
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    conditions[condition.type] = condition
  end
end

local function observed_generation()
  if obj.status.observedGeneration ~= nil then
    return obj.status.observedGeneration
  end
  local newest = nil
  for _, type in ipairs({"Ready", "Reconciling", "Stalled", "Available", "Progressing", "Degraded"}) do
    local condition = conditions[type]
    if condition ~= nil and condition.observedGeneration ~= nil then
      if newest == nil or condition.observedGeneration > newest then
        newest = condition.observedGeneration
      end
    end
  end
  return newest
end

local function message_of(type, fallback)
  local condition = conditions[type]
  if condition ~= nil and condition.message ~= nil and condition.message ~= "" then
    return condition.message
  end
  return fallback
end

local phase = obj.status.phase
local generation = obj.metadata.generation
local seen = observed_generation()
if generation ~= nil and seen ~= nil and seen < generation then
  hs.message = "Waiting for the controller to observe generation " .. generation .. " (status is for " .. seen .. ")"
  return hs
end

local function is_true(type)
  return conditions[type] ~= nil and conditions[type].status == "True"
end

if phase == "Failed" or is_true("Stalled") or is_true("Degraded") then
  hs.status = "Degraded"
  hs.message = message_of("Stalled", message_of("Degraded", message_of("Available", "Failed")))
  return hs
end

