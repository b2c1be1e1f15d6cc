"""A small application to test workloads against (issue 38): a login that issues a token per user
from a CSV, routes that refuse a request without a valid token, one route that stalls, and its own
count of every request by route and status, which a test reads back at /__counts (and the users each
route saw at /__users) to hold stampede's per-name numbers against the server's.

    python3 shop.py --port 8081 --users users.csv [--slow-ms 500]

users.csv: a header row `user,password`, then one row per user.
"""
import argparse
import asyncio
import collections
import csv
import hmac
import json
import secrets

from aiohttp import web


def main():
    args = argparse.ArgumentParser()
    args.add_argument("--port", type=int, required=True)
    args.add_argument("--host", default="127.0.0.1")
    args.add_argument("--users", required=True)
    args.add_argument("--slow-ms", type=int, default=500)
    opts = args.parse_args()
    with open(opts.users, newline="") as f:
        passwords = {row["user"]: row["password"] for row in csv.DictReader(f)}
    web.run_app(app(passwords, opts.slow_ms), host=opts.host, port=opts.port, access_log=None,
                print=None)


def app(passwords, slow_ms):
    counts = collections.Counter()
    users_seen = collections.defaultdict(list)
    tokens = {}  # token -> user

    def counted(route, handler):
        async def wrapped(request):
            response = await handler(request)
            counts[(route, response.status)] += 1
            return response
        return wrapped

    def user_of(request):
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer "):] if header.startswith("Bearer ") else None
        return tokens.get(token) if token else None

    async def login(request):
        try:
            body = await request.json()
            user, password = body["user"], body["password"]
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": "send {\"user\": …, \"password\": …}"}, status=400)
        expected = passwords.get(user)
        if expected is None or not hmac.compare_digest(expected, password):
            return web.json_response({"error": "wrong user or password"}, status=401)
        token = secrets.token_hex(16)
        tokens[token] = user
        users_seen["login"].append(user)
        return web.json_response({"token": token, "user": user})

    def guarded(route, reply):
        async def handler(request):
            user = user_of(request)
            if user is None:
                return web.json_response({"error": "log in first"}, status=401)
            users_seen[route].append(user)
            return await reply(request, user)
        return handler

    async def items(request, user):
        return web.json_response({"user": user, "page": request.query.get("page", "1"), "items": []})

    async def search(request, user):
        return web.json_response({"q": request.query.get("q", ""), "hits": 0})

    async def cart(request, user):
        body = await request.read()
        return web.json_response({"user": user, "bytes": len(body)}, status=201)

    async def slow(request, user):
        await asyncio.sleep(slow_ms / 1000)
        return web.json_response({"slow": slow_ms})

    async def show_counts(request):
        out = collections.defaultdict(dict)
        for (route, status), n in counts.items():
            out[route][str(status)] = n
        return web.json_response(out)

    async def show_users(request):
        return web.json_response(users_seen)

    application = web.Application()
    application.router.add_post("/login", counted("login", login))
    application.router.add_get("/items", counted("items", guarded("items", items)))
    application.router.add_get("/search", counted("search", guarded("search", search)))
    application.router.add_post("/cart", counted("cart", guarded("cart", cart)))
    application.router.add_get("/slow", counted("slow", guarded("slow", slow)))
    application.router.add_get("/__counts", show_counts)
    application.router.add_get("/__users", show_users)
    return application


if __name__ == "__main__":
    main()
