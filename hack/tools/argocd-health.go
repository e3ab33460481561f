// argocd-health runs our Argo CD health checks the way Argo CD's application controller does: in
// gopher-lua (github.com/yuin/gopher-lua, the Lua Argo CD embeds), with the libraries Argo CD opens
// for a health script and no others (package, base and table; no string, no math, no global os),
// a one-second deadline, the object as a global `obj` whose numbers are Lua numbers, and the
// returned table read as Argo CD reads it (JSON into {status, message}; a status Argo CD does not
// know becomes Unknown). The scripts are read from the argocd-cm snippet users apply, so what is
// tested is what ships. Built by hack/build-tools.sh.
//
//	argocd-health ARGOCD_CM.yaml OBJECTS.json
//
// OBJECTS.json is a JSON array of objects. One JSON line per object is printed:
// {"status": ..., "message": ...} or {"error": ...} when the script fails or returns no table.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"sigs.k8s.io/yaml"
)

const healthKeyPrefix = "resource.customizations.health."

// The statuses Argo CD accepts from a health script (gitops-engine's HealthStatusCode values).
var known = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true,
}

type result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// scripts: "group_Kind" -> the health script of that kind, from the ConfigMap's data.
func scripts(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	found := map[string]string{}
	for key, script := range cm.Data {
		if strings.HasPrefix(key, healthKeyPrefix) {
			found[strings.TrimPrefix(key, healthKeyPrefix)] = script
		}
	}
	return found, nil
}

// toLua: a decoded JSON value as Argo CD hands it to the script (integers and floats both Lua
// numbers, null as nil).
func toLua(state *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case json.Number:
		number, err := v.Float64()
		if err != nil {
			return lua.LString(v.String())
		}
		return lua.LNumber(number)
	case string:
		return lua.LString(v)
	case []any:
		table := state.CreateTable(len(v), 0)
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]any:
		table := state.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetH(lua.LString(key), toLua(state, item))
		}
		return table
	}
	return lua.LNil
}

// fromLua: the returned table as JSON would carry it, for the {status, message} Argo CD reads.
func fromLua(value lua.LValue) any {
	switch v := value.(type) {
	case lua.LBool:
		return bool(v)
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		return string(v)
	case *lua.LTable:
		object := map[string]any{}
		v.ForEach(func(key, item lua.LValue) { object[key.String()] = fromLua(item) })
		return object
	}
	return nil
}

func evaluate(script string, object map[string]any) result {
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	// The libraries Argo CD opens, in its order. Its reduced os library is registered under the
	// name of the table library, so a script sees no global os (only require("os") finds one).
	for _, library := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		fn := state.NewFunction(library.open)
		if err := state.CallByParam(lua.P{Fn: fn, NRet: 0, Protect: true}, lua.LString(library.name)); err != nil {
			return result{Error: err.Error()}
		}
	}
	state.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(l.SetFuncs(l.NewTable(), map[string]lua.LGFunction{
			"time": func(l *lua.LState) int { l.Push(lua.LNumber(time.Now().Unix())); return 1 },
		}))
		return 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state.SetContext(ctx)
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(script); err != nil {
		return result{Error: err.Error()}
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		return result{Error: fmt.Sprintf("expect table output from Lua script, not %s", state.Get(-1).Type())}
	}
	encoded, err := json.Marshal(fromLua(returned))
	if err != nil {
		return result{Error: err.Error()}
	}
	var health struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(encoded, &health); err != nil {
		return result{Error: err.Error()}
	}
	if !known[health.Status] {
		return result{Status: "Unknown", Message: "Lua returned an invalid health status"}
	}
	return result{Status: health.Status, Message: health.Message}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: argocd-health ARGOCD_CM.yaml OBJECTS.json")
		os.Exit(2)
	}
	byKind, err := scripts(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	raw, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var objects []map[string]any
	if err := decoder.Decode(&objects); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	for _, object := range objects {
		apiVersion, _ := object["apiVersion"].(string)
		kind, _ := object["kind"].(string)
		group := strings.SplitN(apiVersion, "/", 2)[0]
		script, ok := byKind[group+"_"+kind]
		if !ok {
			_ = encoder.Encode(result{Error: fmt.Sprintf("no health script for %s %s", apiVersion, kind)})
			continue
		}
		_ = encoder.Encode(evaluate(script, object))
	}
}
